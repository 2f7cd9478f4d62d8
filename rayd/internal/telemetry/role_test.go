package telemetry

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

func staticSigner(region string) *RoleSigner {
	return &RoleSigner{
		creds: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "secret-KEY-canary", SessionToken: "session-canary"}, nil
		}),
		region: func(context.Context) (string, error) { return region, nil },
		signer: v4.NewSigner(),
		now:    func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
	}
}

// The export is signed for CloudWatch (service monitoring) in the region
// of the endpoint, else the metadata service's, with the session token.
func TestRoleSignerThroughExporter(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	var hdr http.Header
	col.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr = r.Header.Clone()
		col.serve(w, r)
	})
	e := newExporter(t, nil, func(o *Options) { o.Signer = staticSigner("eu-west-3") })
	c := testConfig(t, col, time.Hour)
	c.Auth, c.Token = AuthExecutionRole, ""
	if err := e.Configure(c); err != nil {
		t.Fatal(err)
	}
	e.Flush(t.Context())
	if st := e.Status(); st.Exported != 1 {
		t.Fatalf("status %+v", st)
	}
	auth := hdr.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDTEST/20260102/eu-west-3/monitoring/aws4_request") ||
		strings.Contains(auth, "secret-KEY-canary") {
		t.Errorf("Authorization %q", auth)
	}
	if hdr.Get("X-Amz-Security-Token") != "session-canary" || hdr.Get("X-Amz-Date") != "20260102T030405Z" {
		t.Errorf("headers %v", hdr)
	}
}

func TestEndpointRegion(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]string{
		"monitoring.us-east-1.amazonaws.com":     "us-east-1",
		"MONITORING.eu-west-1.amazonaws.com":     "eu-west-1",
		"monitoring.cn-north-1.amazonaws.com.cn": "cn-north-1",
		"monitoring.amazonaws.com":               "",
		"collector.example":                      "",
		"monitoring.us_east.amazonaws.com":       "",
	} {
		if got := endpointRegion(host); got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, "https://monitoring.ap-south-1.amazonaws.com/v1/metrics", nil)
	if err := staticSigner("never-asked").Sign(t.Context(), req, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if a := req.Header.Get("Authorization"); !strings.Contains(a, "/ap-south-1/monitoring/") {
		t.Errorf("Authorization %q", a)
	}
}

// Without a metadata service the signer fails fast, typed.
func TestRoleSignerNoIMDS(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	r := NewRoleSigner(RoleOptions{IMDSEndpoint: srv.URL})
	req, _ := http.NewRequest(http.MethodPost, "https://monitoring.us-east-1.amazonaws.com/v1/metrics", nil)
	start := time.Now()
	if err := r.Sign(t.Context(), req, nil); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("Sign = %v", err)
	}
	req2, _ := http.NewRequest(http.MethodPost, "https://collector.example/v1/metrics", nil)
	if err := r.Sign(t.Context(), req2, nil); !errors.Is(err, ErrNoCredentials) {
		t.Fatalf("Sign (region from IMDS) = %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}
