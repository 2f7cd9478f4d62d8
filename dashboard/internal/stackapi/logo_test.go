package stackapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/rayito-dev/rayito/dashboard/internal/theme"
)

type fakeObject struct {
	body  []byte
	err   error
	asked []string
}

func (f *fakeObject) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	f.asked = append(f.asked, *in.Bucket+"/"+*in.Key)
	if f.err != nil {
		return nil, f.err
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(bytes.NewReader(f.body))}, nil
}

const goodSVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><rect width="10" height="10" fill="#123456"/></svg>`

// TestLogo: the logo object is read once from the bucket and key named,
// validated like the local dashboard's (a script, an oversize file or an
// unreadable object gives no logo), served at /logo.svg with its own CSP
// and announced in /config.json; without one /logo.svg is 404.
func TestLogo(t *testing.T) {
	ctx := context.Background()
	for _, bad := range []string{"", "s3://b", "s3:///k", "s3://B/k", "https://b/k", "s3://bucket/../k", "s3://bucket/a b"} {
		if _, _, err := ParseLogoLocation(bad); bad != "" && !errors.Is(err, ErrConfig) {
			t.Errorf("ParseLogoLocation(%q): %v", bad, err)
		}
	}
	b, k, err := ParseLogoLocation("s3://rayito-brand/logos/logo.svg")
	if err != nil || b != "rayito-brand" || k != "logos/logo.svg" {
		t.Fatalf("%q %q %v", b, k, err)
	}
	f := &fakeObject{body: []byte(goodSVG)}
	logo, err := LoadLogo(ctx, f, b, k)
	if err != nil || string(logo) != goodSVG || len(f.asked) != 1 || f.asked[0] != "rayito-brand/logos/logo.svg" {
		t.Fatalf("LoadLogo: %q %v %v", logo, err, f.asked)
	}
	for name, obj := range map[string]*fakeObject{
		"script":     {body: []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`)},
		"oversize":   {body: []byte(goodSVG[:len(goodSVG)-6] + strings.Repeat(" ", theme.MaxLogoBytes) + "</svg>")},
		"unreadable": {err: errors.New("AccessDenied: arn:aws:s3:::rayito-brand secret")},
	} {
		if got, err := LoadLogo(ctx, obj, b, k); err == nil || got != nil || strings.Contains(err.Error(), "rayito-brand") {
			t.Errorf("%s: %q %v", name, got, err)
		}
	}

	r := newRig(t, false, nil)
	if st, _ := do(t, r.h, request("GET", "/logo.svg", "", nil, "")); st != 404 {
		t.Fatalf("/logo.svg without a logo = %d", st)
	}
	r.h.Config.Logo = logo
	resp, err := r.h.Handle(ctx, request("GET", "/logo.svg", "", nil, ""))
	if err != nil || resp.StatusCode != 200 || resp.Body != goodSVG || resp.Headers["Content-Security-Policy"] != LogoCSP ||
		resp.Headers["Content-Type"] != "image/svg+xml" || resp.Headers["X-Content-Type-Options"] != "nosniff" {
		t.Fatalf("/logo.svg = %d %v %v", resp.StatusCode, resp.Headers, err)
	}
	if st, m := do(t, r.h, request("GET", "/config.json", "", nil, "")); st != 200 || m["logo"] != true {
		t.Fatalf("/config.json = %d %v", st, m)
	}
	if resp, _ := r.h.Handle(ctx, request("POST", "/logo.svg", "", nil, "")); resp.StatusCode != 405 {
		t.Fatalf("POST /logo.svg = %d", resp.StatusCode)
	}
}
