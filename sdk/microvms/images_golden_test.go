package microvms

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// imageGolden pins the Authorization of every new operation's request to
// lambda.us-east-1.amazonaws.com at 2026-01-02T03:04:05Z, with the test
// credentials and session token.
var imageGolden = map[string]string{
	"CreateMicrovmImage":              "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=7b75a4aa7f447fdd0046cbf0204366871c2dda49f2329d3cb69d5108b4bde26c",
	"DeleteMicrovmImageVersion":       "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=f6769ff547e15abdb9aac49bc391cd9fcf51a890e8c4e561e34bf45a11ce00aa",
	"UpdateMicrovmImageVersion":       "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=c6b062d28aaae0062af74f0695ed2abd6d4077366f447edd7c10743ab80c6330",
	"ListMicrovmImageBuilds":          "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=58ce316fd4f190846bbadb0abee72fe4ca94c04ba990b8a7e4186342cf2b4ce8",
	"GetMicrovmImageVersion":          "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=f981dc6373b7bb4194b3cefb0c05d308d8508bb89340a2fb1790a8488e4a1d9d",
	"ListTags":                        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=89df21a97514c7351f123b441bd9e1ea6812221156a22f6d79f663607c6b64bd",
	"ListMicrovmImageVersions":        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=45075e0c811ee4b0605d6fcdbb3713088464dbe8c8bdf4d59a9e15436892b54f",
	"UntagResource":                   "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=7a2468aa5a4655fcd041798de0d21cbd0567f0f454116213018fdd909456a35b",
	"DeleteMicrovmImage":              "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=fe27cbd2934a7a225faa9e59497353731f504a96c1d37b8511da62b457f0b96f",
	"GetMicrovmImage by ARN":          "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=3fce3bd8c7e9cbe016f9ed0a9bbb4062bbf4799fd0ba409e5941abdc81a0f874",
	"ListMicrovmImages":               "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=e78d89b693a3582357cd6f1f92b702d6156cd3ac71343e7c2a0596c7c6ed0151",
	"ListManagedMicrovmImageVersions": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=a62c134a8e4f75b2d5c4ee9dfd7426a38d429e365942f139cc0bbd1102e3eed7",
	"TagResource":                     "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=4b7c045d94fd3d02c24ac576e0cc2d3b64cd3350f96e9fc75a42d8abd2a67119",
	"CreateMicrovmShellAuthToken":     "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=3a650ebe41c6c7f1bd8ca60abd7aa205ddb8c56c3af437f40951d5bd7edde27d",
	"ListManagedMicrovmImages":        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=893c727ffa258e0997cb27c2c49baeb768baca5a8282f76d98dfc953e16c6fa8",
	"UpdateMicrovmImage":              "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=e6887f0800bfa028db03fe4b38597ce4c8891a20e006d0548d348a32023a2c98",
	"GetMicrovmImageBuild, escaped":   "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature=ea009f2ed91babbe49f5ede9ff17853d5249f5d0f1a7b4f67d24ebe76196e0f0",
}

func TestImageSigV4Golden(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const host = "lambda.us-east-1.amazonaws.com"
	for _, tt := range imageOps() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			capture := &captureTransport{reply: genericReply}
			c, err := New("https://"+host,
				WithCredentials(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
					return aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, SessionToken: testToken}, nil
				})),
				WithRegion("us-east-1"), WithClock(func() time.Time { return at }),
				WithHTTPClient(&http.Client{Transport: capture}), WithoutRateLimits())
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.call(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			r, body := capture.last(), capture.lastBody()
			if r.Method != tt.method || r.URL.Host != host || r.URL.EscapedPath() != tt.path || r.URL.RawQuery != tt.query || string(body) != tt.body {
				t.Errorf("request %s %s%s?%s %s", r.Method, r.URL.Host, r.URL.EscapedPath(), r.URL.RawQuery, body)
			}
			signed := map[string]string{
				"x-amz-date": "20260102T030405Z", "x-amz-content-sha256": sha256Hex(body), "x-amz-security-token": testToken,
			}
			if tt.body != "" {
				signed["content-type"] = "application/json"
				signed["content-length"] = strconv.Itoa(len(tt.body))
			}
			ref := referenceSign(sigv4Request{method: tt.method, host: host, path: tt.path, query: tt.query, headers: signed, body: body},
				testAKID, testSecret, "us-east-1", "lambda", at)
			got := r.Header.Get("Authorization")
			if got != ref {
				t.Errorf("Authorization\n got %s\n ref %s", got, ref)
			}
			if want, ok := imageGolden[tt.name]; !ok {
				t.Errorf("no golden Authorization; got %s", got)
			} else if got != want {
				t.Errorf("Authorization\n   got %s\ngolden %s", got, want)
			}
		})
	}
}
