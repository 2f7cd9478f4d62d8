package transport

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

func TestTokensCacheAndRefresh(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	var mints atomic.Int32
	s := NewTokens(func(context.Context) (string, error) {
		return "tok" + string(rune('0'+mints.Add(1))), nil
	}, func() time.Time { return now })
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = s.Get(ctx) }()
	}
	wg.Wait()
	if mints.Load() != 1 {
		t.Fatalf("%d concurrent mints, want 1", mints.Load())
	}
	now = now.Add(44 * time.Minute)
	if tok, _ := s.Get(ctx); tok != "tok1" {
		t.Fatalf("refreshed too early: %s", tok)
	}
	now = now.Add(2 * time.Minute)
	if tok, _ := s.Get(ctx); tok != "tok2" {
		t.Fatalf("not refreshed at 45 min: %s", tok)
	}
	s.Invalidate("tok1") // stale: ignored
	if tok, _ := s.Get(ctx); tok != "tok2" {
		t.Fatal("invalidating an old token dropped the new one")
	}
	s.Invalidate("tok2")
	if tok, _ := s.Get(ctx); tok != "tok3" {
		t.Fatalf("not re-minted after invalidate: %s", tok)
	}
	boom := errors.New("boom")
	s.mint = func(context.Context) (string, error) { return "", boom }
	s.Invalidate("tok3")
	if _, err := s.Get(ctx); !errors.Is(err, boom) {
		t.Fatal(err)
	}
}

// The proxy's own 403 (no gRPC status) re-mints once and retries; rayd's
// errors are passed through.
func TestProxyRetriesProxy403Once(t *testing.T) {
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
	tokens := NewTokens(func(context.Context) (string, error) {
		return "jwe-" + string(rune('0'+mints.Add(1))), nil
	}, nil)
	c := &http.Client{Transport: &Proxy{Base: http.DefaultTransport, Host: "abc.microvms.localhost", Port: 8080, Tokens: tokens, AccessToken: "secret", ForceH2: true}}
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

func TestProxyKeepsRaydErrors(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("grpc-status", "7")
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	tokens := NewTokens(func(context.Context) (string, error) { return "jwe", nil }, nil)
	c := &http.Client{Transport: &Proxy{Base: http.DefaultTransport, Host: "h", Port: 8080, Tokens: tokens}}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if calls.Load() != 1 {
		t.Fatalf("rayd's 403 was retried (%d calls)", calls.Load())
	}
}
