package services

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/rayito-dev/rayito/proto/localplatform"
)

// presign signs method on raw with creds for expires, at t, as the SDK does.
func presign(t *testing.T, creds aws.Credentials, method, raw string, expires time.Duration, at time.Time) string {
	t.Helper()
	req, err := http.NewRequest(method, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := req.URL.Query()
	q.Set("X-Amz-Expires", strconv.Itoa(int(expires/time.Second)))
	req.URL.RawQuery = q.Encode()
	u, _, err := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true }).
		PresignHTTP(context.Background(), creds, req, "UNSIGNED-PAYLOAD", "s3", localplatform.Region, at)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func do(t *testing.T, h http.Handler, method, raw string, body []byte) (int, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, raw, r)
	if body != nil {
		req.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// TestPresignedVerification: the owner's path-style store accepts a URL
// pre-signed with the transfer credentials (PUT, GET, DELETE) and refuses
// a tampered one (path, method, signature, expiry parameter), an expired
// one, one signed with another key (a sandbox's credentials, another
// platform's transfer credentials, expired credentials), anything outside
// the transfer prefix or the default bucket, and sub-resources.
func TestPresignedVerification(t *testing.T) {
	s, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := New(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Transfers()
	now := time.Now()
	creds := s.TransferCredentials(now)
	if !strings.HasPrefix(creds.AccessKeyID, transferKeyPrefix) || creds.Expires.Sub(now) > localplatform.TransferCredentialTTL {
		t.Fatalf("credentials %s expire %v", creds.AccessKeyID, creds.Expires)
	}
	base := "http://127.0.0.1:9/" + localplatform.DefaultBucket + "/"
	key := localplatform.TransferPrefix + "/sbx-1/up/t1"
	put := presign(t, creds, http.MethodPut, base+key, time.Hour, now)
	if code, body := do(t, h, http.MethodPut, put, []byte("hello")); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	get := presign(t, creds, http.MethodGet, base+key, time.Hour, now)
	if code, body := do(t, h, http.MethodGet, get, nil); code != http.StatusOK || body != "hello" {
		t.Fatalf("GET: %d %q", code, body)
	}

	refused := map[string]struct {
		method, url string
	}{
		"GET with PUT's URL":         {http.MethodGet, put},
		"another key":                {http.MethodGet, strings.Replace(get, "/t1?", "/t2?", 1)},
		"signature changed":          {http.MethodGet, get[:len(get)-1] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", get[len(get)-1])+1)%16])},
		"longer expiry":              {http.MethodGet, strings.Replace(get, "X-Amz-Expires=3600", "X-Amz-Expires=7200", 1)},
		"extra parameter":            {http.MethodGet, get + "&acl="},
		"expired":                    {http.MethodGet, presign(t, creds, http.MethodGet, base+key, time.Minute, now.Add(-2*time.Minute))},
		"a sandbox's credentials":    {http.MethodGet, presign(t, s.Credentials("sbx-1"), http.MethodGet, base+key, time.Hour, now)},
		"another platform's key":     {http.MethodGet, presign(t, other.TransferCredentials(now), http.MethodGet, base+key, time.Hour, now)},
		"expired credentials":        {http.MethodGet, presign(t, s.TransferCredentials(now.Add(-13*time.Hour)), http.MethodGet, base+key, time.Minute, now)},
		"outside the prefix":         {http.MethodPut, presign(t, creds, http.MethodPut, base+"tenants/acme/proj/manifest.json", time.Hour, now)},
		"the prefix itself":          {http.MethodGet, presign(t, creds, http.MethodGet, base+localplatform.TransferPrefix+"/sbx-1", time.Hour, now)},
		"another bucket":             {http.MethodPut, presign(t, creds, http.MethodPut, "http://127.0.0.1:9/other/"+key, time.Hour, now)},
		"another direction":          {http.MethodPut, presign(t, creds, http.MethodPut, base+localplatform.TransferPrefix+"/sbx-1/sideways/t1", time.Hour, now)},
		"POST":                       {http.MethodPost, presign(t, creds, http.MethodPost, base+key, time.Hour, now)},
		"no signature":               {http.MethodGet, base + key},
		"dot-dot":                    {http.MethodGet, presign(t, creds, http.MethodGet, base+localplatform.TransferPrefix+"/sbx-1/up/..", time.Hour, now)},
		"a header signature instead": {http.MethodGet, base + key + "?X-Amz-Algorithm=AWS4-HMAC-SHA256"},
	}
	for name, c := range refused {
		if code, _ := do(t, h, c.method, c.url, nil); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, code)
		}
	}
	// Unsigned x-amz-* headers, and a copy from another object (signed
	// or not), are refused.
	for _, hdr := range []string{"X-Amz-Copy-Source", "X-Amz-Meta-Extra"} {
		req := httptest.NewRequest(http.MethodPut, put, strings.NewReader("x"))
		req.Header.Set("Content-Length", "1")
		req.Header.Set(hdr, localplatform.DefaultBucket+"/tenants/acme/proj/manifest.json")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusForbidden {
			t.Errorf("PUT with %s: %d, want 403", hdr, w.Code)
		}
	}

	// A sandbox's rayd, virtual-hosted through its socket: its own objects
	// only.
	vh := "https://" + localplatform.TransferHost + "/"
	sb := s.Sandbox("sbx-1")
	if code, body := do(t, sb, http.MethodGet, presign(t, creds, http.MethodGet, vh+key, time.Hour, now), nil); code != http.StatusOK || body != "hello" {
		t.Errorf("rayd's GET: %d %q", code, body)
	}
	if code, _ := do(t, s.Sandbox("sbx-2"), http.MethodGet, presign(t, creds, http.MethodGet, vh+key, time.Hour, now), nil); code != http.StatusForbidden {
		t.Errorf("another sandbox's object through its socket: %d", code)
	}
	del := presign(t, creds, http.MethodDelete, vh+key, time.Hour, now)
	if code, _ := do(t, sb, http.MethodDelete, del, nil); code/100 != 2 {
		t.Errorf("rayd's DELETE: %d", code)
	}
	if code, _ := do(t, h, http.MethodGet, get, nil); code != http.StatusNotFound {
		t.Errorf("GET after the delete: %d", code)
	}
}

// TestExecutionRoleOffTransfers: a sandbox's own credentials (the
// execution role's) cannot read or write transfer objects.
func TestExecutionRoleOffTransfers(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "http://"+localplatform.S3Host+"/"+localplatform.DefaultBucket+"/"+localplatform.TransferPrefix+"/sbx-1/up/t1", nil)
	if allowed(r) {
		t.Error("the execution role may read a transfer object")
	}
	r = httptest.NewRequest(http.MethodPut, "http://"+localplatform.S3Host+"/"+localplatform.DefaultBucket+"/tenants/x", nil)
	if !allowed(r) {
		t.Error("the execution role may not write its prefix")
	}
}

// FuzzVerifyPresigned: no query, path or host makes verifyPresigned
// panic, and nothing unsigned passes.
func FuzzVerifyPresigned(f *testing.F) {
	s, err := New(f.TempDir(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("GET", "/rayito-local/rayito-transfer/a/up/b", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=RAYITOXFER1999999999%2F20260101%2Flocal%2Fs3%2Faws4_request&X-Amz-Date=20260101T000000Z&X-Amz-Expires=60&X-Amz-SignedHeaders=host&X-Amz-Signature=00", "127.0.0.1:1")
	f.Add("PUT", "/", "X-Amz-Expires=-1&X-Amz-SignedHeaders=host%3Bx-amz-meta-a", "h")
	f.Fuzz(func(t *testing.T, method, path, query, host string) {
		r := &http.Request{Method: method, Host: host, URL: &url.URL{Path: path, RawQuery: query}, Header: http.Header{}}
		if s.verifyPresigned(r, time.Now()) == nil {
			t.Fatalf("accepted %s %s?%s", method, path, query)
		}
		_, _ = TransferKey(strings.TrimPrefix(path, "/"))
	})
}

// TestSweepTransfers: transfer objects older than the retention are
// deleted (a GET is 404 after), newer ones stay.
func TestSweepTransfers(t *testing.T) {
	dir := t.TempDir()
	s, err := New(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Transfers()
	now := time.Now()
	creds := s.TransferCredentials(now)
	base := "http://127.0.0.1:9/" + localplatform.DefaultBucket + "/"
	keys := []string{localplatform.TransferPrefix + "/sbx-1/down/old", localplatform.TransferPrefix + "/sbx-1/down/new", localplatform.TransferPrefix + "/sbx-2/up/old"}
	for _, k := range keys {
		if code, body := do(t, h, http.MethodPut, presign(t, creds, http.MethodPut, base+k, time.Hour, now), []byte("x")); code != http.StatusOK {
			t.Fatalf("PUT %s: %d %s", k, code, body)
		}
	}
	old := now.Add(-TransferRetention - time.Minute)
	for _, k := range []string{keys[0], keys[2]} {
		if err := os.Chtimes(filepath.Join(dir, "buckets", localplatform.DefaultBucket, k), old, old); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.SweepTransfers(now, TransferRetention)
	if err != nil || n != 2 {
		t.Fatalf("swept %d, %v; want 2", n, err)
	}
	for i, k := range keys {
		code, _ := do(t, h, http.MethodGet, presign(t, creds, http.MethodGet, base+k, time.Hour, now), nil)
		if want := map[bool]int{true: http.StatusNotFound, false: http.StatusOK}[i != 1]; code != want {
			t.Errorf("GET %s after the sweep: %d, want %d", k, code, want)
		}
	}
}
