package rayito

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestTokenStoreCachesAndRefreshes(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	var mints atomic.Int32
	s := &tokenStore{now: func() time.Time { return now }, mint: func(context.Context) (string, error) {
		return "tok" + string(rune('0'+mints.Add(1))), nil
	}}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = s.get(ctx) }()
	}
	wg.Wait()
	if mints.Load() != 1 {
		t.Fatalf("%d concurrent mints, want 1", mints.Load())
	}
	now = now.Add(44 * time.Minute)
	if tok, _ := s.get(ctx); tok != "tok1" {
		t.Fatalf("refreshed too early: %s", tok)
	}
	now = now.Add(2 * time.Minute)
	if tok, _ := s.get(ctx); tok != "tok2" {
		t.Fatalf("not refreshed at 45 min: %s", tok)
	}
	s.invalidate("tok1") // stale: ignored
	if tok, _ := s.get(ctx); tok != "tok2" {
		t.Fatal("invalidating an old token dropped the new one")
	}
	s.invalidate("tok2")
	if tok, _ := s.get(ctx); tok != "tok3" {
		t.Fatalf("not re-minted after invalidate: %s", tok)
	}
	boom := errors.New("boom")
	s.mint = func(context.Context) (string, error) { return "", boom }
	s.invalidate("tok3")
	if _, err := s.get(ctx); !errors.Is(err, boom) {
		t.Fatal(err)
	}
}

// The proxy's own 403 (no gRPC status) re-mints once and retries; rayd's
// errors are passed through.
func TestProxyTransportRetriesProxy403Once(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	var sawHost, sawAuth, sawPort, sawH2, sawToken string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		sawHost, sawAuth, sawPort, sawH2, sawToken = r.Host, r.Header.Get("x-aws-proxy-auth"), r.Header.Get("x-aws-proxy-port"), r.Header.Get("x-aws-proxy-force-h2"), r.Header.Get("x-access-token")
		if n == 1 {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	var mints atomic.Int32
	tokens := &tokenStore{now: time.Now, mint: func(context.Context) (string, error) {
		return "jwe-" + string(rune('0'+mints.Add(1))), nil
	}}
	c := &http.Client{Transport: &proxyTransport{base: http.DefaultTransport, host: "abc.microvms.localhost", port: 8080, tokens: tokens, accessToken: "secret", forceH2: true}}
	resp, err := c.Post(srv.URL+"/x", "application/proto", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "payload" || calls.Load() != 2 || mints.Load() != 2 {
		t.Fatalf("status %d body %q calls %d mints %d", resp.StatusCode, b, calls.Load(), mints.Load())
	}
	if sawHost != "abc.microvms.localhost" || sawAuth != "jwe-2" || sawPort != "8080" || sawH2 != "true" || sawToken != "secret" {
		t.Fatalf("headers host=%q auth=%q port=%q h2=%q token=%q", sawHost, sawAuth, sawPort, sawH2, sawToken)
	}
}

func TestProxyTransportKeepsRaydErrors(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("grpc-status", "7")
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	tokens := &tokenStore{now: time.Now, mint: func(context.Context) (string, error) { return "jwe", nil }}
	c := &http.Client{Transport: &proxyTransport{base: http.DefaultTransport, host: "h", port: 8080, tokens: tokens}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if calls.Load() != 1 {
		t.Fatalf("rayd's 403 was retried (%d calls)", calls.Load())
	}
}

func TestCappedOutput(t *testing.T) {
	t.Parallel()
	var c capped
	c.write([]byte("hello"), 8)
	c.write([]byte("world"), 8)
	if string(c.buf) != "hellowor" || !c.truncated {
		t.Fatalf("%q %v", c.buf, c.truncated)
	}
}

func TestConfigBackendSelection(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	c := newConfig([]Option{withGetenv(getenv)})
	if c.backend != BackendLocal || c.endpoint != DefaultLocalEndpoint {
		t.Fatalf("default %+v", c)
	}
	env["RAYITO_BACKEND"] = "aws"
	env["RAYITO_TEMPLATE"] = "arn:aws:lambda:us-east-1:1:microvm-image:x"
	c = newConfig([]Option{withGetenv(getenv)})
	if c.backend != BackendAWS || c.endpoint != "" || c.template == "" {
		t.Fatalf("env %+v", c)
	}
	c = newConfig([]Option{withGetenv(getenv), WithBackend(BackendLocal), WithEndpoint("http://127.0.0.1:1")})
	if c.backend != BackendLocal || c.endpoint != "http://127.0.0.1:1" {
		t.Fatalf("explicit %+v", c)
	}
}

func TestCreateRefusesBadOptionsLocally(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := Create(ctx, WithEndpoint("http://127.0.0.1:1"), WithTimeout(time.Millisecond)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("tiny timeout: %v", err)
	}
	if _, err := Create(ctx, WithBackend(BackendAWS), withGetenv(func(string) string { return "" })); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("aws without template: %v", err)
	}
	if _, err := Create(ctx, WithEndpoint("http://127.0.0.1:1"), WithEnvs(map[string]string{"BAD=NAME": "x"})); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad env: %v", err)
	}
	if _, err := Connect(ctx, "microvm-1", WithAccessToken("not a token")); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad token: %v", err)
	}
	// The local platform has its two images and the templates built on
	// it: a name that cannot be one is refused before any call (whether
	// a valid name was built is the platform's answer).
	if _, err := Create(ctx, WithEndpoint("http://127.0.0.1:1"), WithTemplate("python:3.12")); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), `"python:3.12" cannot name one`) {
		t.Fatalf("local with another template: %v", err)
	}
	for _, tmpl := range []string{LocalTemplate, LocalRootTemplate, "my-template"} {
		if _, err := Create(ctx, WithEndpoint("http://127.0.0.1:1"), WithTemplate(tmpl)); errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("local with its own template %s: %v", tmpl, err)
		}
	}
}

// TestCreateFailsAtOnceWhenTheBootFailed: the local platform answers
// RunMicrovm after the boot; a sandbox that ended during it is an
// ErrSandboxEnded without any polling, and the platform's reason is kept.
func TestCreateFailsAtOnceWhenTheBootFailed(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"microvmId":"microvm-1","state":"TERMINATING","stateReason":"launch failed: no cgroups","endpoint":"x.microvms.localhost"}`)
	}))
	defer srv.Close()
	_, err := Create(t.Context(), WithBackend(BackendLocal), WithEndpoint(srv.URL))
	if !errors.Is(err, ErrSandboxEnded) || !strings.Contains(err.Error(), "no cgroups") {
		t.Fatalf("Create = %v, want ErrSandboxEnded with the reason", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d requests, want only RunMicrovm", n)
	}
}
