package microvms

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// captureTransport records requests instead of sending them and answers
// every one with reply.
type captureTransport struct {
	reply  string
	mu     sync.Mutex
	reqs   []*http.Request
	bodies [][]byte
}

func (c *captureTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body.Close()
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, r.Clone(context.Background()))
	c.bodies = append(c.bodies, body)
	c.mu.Unlock()
	return &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(strings.NewReader(c.reply)),
		Request:    r,
	}, nil
}

func (c *captureTransport) Do(r *http.Request) (*http.Response, error) { return c.RoundTrip(r) }

func (c *captureTransport) last() *http.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reqs[len(c.reqs)-1]
}

func (c *captureTransport) lastBody() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bodies[len(c.bodies)-1]
}

// ---- A reference SigV4 signer, written from the AWS documentation
// ("Create a signed AWS API request"), independent of aws-sdk-go-v2. ----

type sigv4Request struct {
	method  string
	host    string
	path    string            // as sent, already escaped once
	query   string            // canonical query string
	headers map[string]string // lower-case name → value, host excluded
	body    []byte
}

// uriEncode percent-encodes every byte but the unreserved characters, with
// upper-case hex, as SigV4 requires.
func uriEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// referenceSign returns the Authorization header value for r.
func referenceSign(r sigv4Request, akid, secret, region, service string, at time.Time) string {
	// Canonical URI: for services other than S3 each segment of the
	// (already escaped) path is URI-encoded again.
	segs := strings.Split(r.path, "/")
	for i, s := range segs {
		segs[i] = uriEncode(s)
	}
	canonicalURI := strings.Join(segs, "/")

	headers := map[string]string{"host": r.host}
	for k, v := range r.headers {
		headers[k] = strings.TrimSpace(v)
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	slices.Sort(names)
	var canonicalHeaders strings.Builder
	for _, k := range names {
		canonicalHeaders.WriteString(k + ":" + headers[k] + "\n")
	}
	signedHeaders := strings.Join(names, ";")

	canonicalRequest := strings.Join([]string{
		r.method, canonicalURI, r.query, canonicalHeaders.String(), signedHeaders, sha256Hex(r.body),
	}, "\n")

	amzDate := at.UTC().Format("20060102T150405Z")
	date := at.UTC().Format("20060102")
	scope := date + "/" + region + "/" + service + "/aws4_request"
	stringToSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + sha256Hex([]byte(canonicalRequest))

	kDate := hmacSHA256([]byte("AWS4"+secret), date)
	kRegion := hmacSHA256(kDate, region)
	kService := hmacSHA256(kRegion, service)
	kSigning := hmacSHA256(kService, "aws4_request")
	signature := hex.EncodeToString(hmacSHA256(kSigning, stringToSign))

	return "AWS4-HMAC-SHA256 Credential=" + akid + "/" + scope + ", SignedHeaders=" + signedHeaders + ", Signature=" + signature
}

const (
	testAKID   = "AKIDEXAMPLE"
	testSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
	testToken  = "FwoGZXIvYXdzEXAMPLE//session+token/with=chars"
)

// TestReferenceSignerVanilla pins the reference signer itself to the
// get-vanilla case of the AWS SigV4 test suite.
func TestReferenceSignerVanilla(t *testing.T) {
	t.Parallel()
	got := referenceSign(sigv4Request{
		method: "GET", host: "example.amazonaws.com", path: "/",
		headers: map[string]string{"x-amz-date": "20150830T123600Z"},
	}, testAKID, testSecret, "us-east-1", "service", time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC))
	const want = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, " +
		"SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
	if got != want {
		t.Fatalf("reference signer is wrong:\n got %s\nwant %s", got, want)
	}
}

// TestSigV4Golden checks the exact signed requests the client sends.
func TestSigV4Golden(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const host = "lambda.us-east-1.amazonaws.com"
	const runBody = `{"imageIdentifier":"arn:aws:lambda:us-east-1:123456789012:microvm-image:demo",` +
		`"logging":{"disabled":{}},"clientToken":"11111111-2222-4333-8444-555555555555"}`

	runCall := func(ctx context.Context, c *Client) error {
		_, err := c.RunMicrovm(ctx, &microvmsapi.RunMicrovmInput{
			ImageIdentifier: "arn:aws:lambda:us-east-1:123456789012:microvm-image:demo",
			Logging:         &microvmsapi.Logging{Disabled: &struct{}{}},
			ClientToken:     "11111111-2222-4333-8444-555555555555",
		})
		return err
	}
	getCall := func(id string) func(context.Context, *Client) error {
		return func(ctx context.Context, c *Client) error {
			_, err := c.GetMicrovm(ctx, id)
			return err
		}
	}
	listCall := func(ctx context.Context, c *Client) error {
		_, err := c.ListMicrovms(ctx, ListInput{MaxResults: 5, NextToken: "a b+c/d"})
		return err
	}

	tests := []struct {
		name   string
		token  string
		call   func(context.Context, *Client) error
		method string
		path   string // escaped, as sent
		query  string // as sent, and canonical
		body   string
		golden string
	}{
		{
			name: "RunMicrovm", call: runCall, method: "POST", path: "/2025-09-09/microvms", body: runBody,
			golden: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, " +
				"SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date, " +
				"Signature=58edca5a3bbc52be67a53c5a79760cb69258cd734b715662adc4d1486a9a7268",
		},
		{
			name: "RunMicrovm with session token", token: testToken, call: runCall, method: "POST", path: "/2025-09-09/microvms", body: runBody,
			golden: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, " +
				"SignedHeaders=content-length;content-type;host;x-amz-content-sha256;x-amz-date;x-amz-security-token, " +
				"Signature=a7cf41cd0066816bfd5259488753bbf87d2a5d34a82b5eeb3c47776a599e852d",
		},
		{
			name: "GetMicrovm", call: getCall("microvm-0123"), method: "GET", path: "/2025-09-09/microvms/microvm-0123",
			golden: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, " +
				"SignedHeaders=host;x-amz-content-sha256;x-amz-date, " +
				"Signature=f3759baa9f0745344ead1c985a89b70c0de58fcf354d9a06475cd4c914122484",
		},
		{
			name: "GetMicrovm with session token", token: testToken, call: getCall("microvm-0123"), method: "GET", path: "/2025-09-09/microvms/microvm-0123",
			golden: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, " +
				"SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, " +
				"Signature=3232bb0c7bcf91cd08376af020a12117d0de7305ca4aa71f0148efcd9baf8e0d",
		},
		{
			name: "GetMicrovm by ARN", token: testToken, call: getCall("arn:aws:lambda:us-east-1:123456789012:microvm/microvm-0123"),
			method: "GET", path: "/2025-09-09/microvms/arn:aws:lambda:us-east-1:123456789012:microvm%2Fmicrovm-0123",
			golden: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, " +
				"SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, " +
				"Signature=79baf7348fc0e0b98e871f3f0ff138a6200436aab747a0f2c8b1907ed2f89347",
		},
		{
			name: "ListMicrovms", token: testToken, call: listCall, method: "GET", path: "/2025-09-09/microvms",
			query: "maxResults=5&nextToken=a%20b%2Bc%2Fd",
			golden: "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/us-east-1/lambda/aws4_request, " +
				"SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, " +
				"Signature=65400cbb669db2ea9f65b534235568d2fb9763315b75961a8ba7ff35d44fdd14",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			capture := &captureTransport{reply: `{"microvmId":"microvm-0123","state":"PENDING","items":[]}`}
			token := tt.token
			c, err := New("https://"+host,
				WithCredentials(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
					return aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, SessionToken: token}, nil
				})),
				WithRegion("us-east-1"),
				WithClock(func() time.Time { return at }),
				WithHTTPClient(&http.Client{Transport: capture}),
				WithoutRateLimits(),
			)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.call(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			r, body := capture.last(), capture.lastBody()

			// The request line and body.
			if r.Method != tt.method || r.URL.Host != host || r.URL.EscapedPath() != tt.path || r.URL.RawQuery != tt.query {
				t.Errorf("request %s %s %s?%s", r.Method, r.URL.Host, r.URL.EscapedPath(), r.URL.RawQuery)
			}
			if string(body) != tt.body || r.ContentLength != int64(len(tt.body)) {
				t.Errorf("body %q (length %d), want %q", body, r.ContentLength, tt.body)
			}

			// Exactly these headers, with these values.
			want := map[string]string{
				"x-amz-date":           "20260102T030405Z",
				"x-amz-content-sha256": sha256Hex([]byte(tt.body)),
			}
			if tt.body != "" {
				want["content-type"] = "application/json"
			}
			if token != "" {
				want["x-amz-security-token"] = token
			}
			var names []string
			for k := range r.Header {
				names = append(names, strings.ToLower(k))
			}
			slices.Sort(names)
			wantNames := []string{"authorization", "user-agent"}
			for k := range want {
				wantNames = append(wantNames, k)
			}
			slices.Sort(wantNames)
			if !slices.Equal(names, wantNames) {
				t.Errorf("headers %v, want %v", names, wantNames)
			}
			for k, v := range want {
				if got := r.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}

			// The signature, recomputed independently.
			signed := map[string]string{}
			for k, v := range want {
				signed[k] = v
			}
			if tt.body != "" {
				signed["content-length"] = strconv.Itoa(len(tt.body))
			}
			ref := referenceSign(sigv4Request{
				method: tt.method, host: host, path: tt.path, query: tt.query, headers: signed, body: []byte(tt.body),
			}, testAKID, testSecret, "us-east-1", "lambda", at)
			got := r.Header.Get("Authorization")
			if got != ref {
				t.Errorf("Authorization\n got %s\n ref %s", got, ref)
			}
			if got != tt.golden {
				t.Errorf("Authorization\n   got %s\ngolden %s", got, tt.golden)
			}
		})
	}
}

// TestSignedRetriesAreResigned checks that each attempt carries a fresh
// date and signature.
func TestSignedRetriesAreResigned(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(n int, _ recorded) reply {
		if n == 0 {
			return reply{status: 503}
		}
		return reply{body: vmJSON}
	})
	var mu sync.Mutex
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		at = at.Add(time.Second)
		return at
	}
	s := &sleeper{}
	c, err := New(f.URL,
		WithCredentials(aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: testAKID, SecretAccessKey: testSecret, SessionToken: testToken}, nil
		})),
		WithRegion("us-east-1"), WithClock(clock), withSleep(s.sleep))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunMicrovm(t.Context(), &microvmsapi.RunMicrovmInput{ImageIdentifier: "arn:img"}); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	a, b := reqs[0].Header, reqs[1].Header
	if a.Get("X-Amz-Date") != "20260102T030406Z" || b.Get("X-Amz-Date") != "20260102T030407Z" {
		t.Errorf("dates %q %q", a.Get("X-Amz-Date"), b.Get("X-Amz-Date"))
	}
	if a.Get("Authorization") == "" || a.Get("Authorization") == b.Get("Authorization") {
		t.Errorf("signatures %q %q", a.Get("Authorization"), b.Get("Authorization"))
	}
	if a.Get("X-Amz-Security-Token") != testToken || string(reqs[0].Body) != string(reqs[1].Body) {
		t.Error("token or body differs")
	}
	if a.Get("X-Amz-Content-Sha256") != sha256Hex(reqs[0].Body) {
		t.Error("content hash")
	}
}
