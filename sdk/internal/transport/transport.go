// Package transport is the SDK's way to a sandbox's ports through the
// platform's endpoint proxy: the HTTP transports (shared by the process,
// or a sandbox's own for its CA pool), the proxy's auth tokens and the
// RoundTripper that adds them. It knows nothing of the root package.
package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// Proxy auth tokens live 60 minutes; the SDK refreshes them at 45.
const (
	AuthTokenMinutes = 60
	AuthTokenRefresh = 45 * time.Minute
)

// Tokens caches the proxy auth token (JWE) of one sandbox and port.
// Concurrent callers share one mint.
type Tokens struct {
	mu       sync.Mutex
	mint     func(ctx context.Context) (string, error)
	token    string
	mintedAt time.Time
	now      func() time.Time
}

// NewTokens returns a cache of the tokens mint makes; now is the clock
// (time.Now when nil).
func NewTokens(mint func(ctx context.Context) (string, error), now func() time.Time) *Tokens {
	if now == nil {
		now = time.Now
	}
	return &Tokens{mint: mint, now: now}
}

// Get returns the cached token, minting one when there is none or it is
// due for refresh.
func (s *Tokens) Get(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && s.now().Sub(s.mintedAt) < AuthTokenRefresh {
		return s.token, nil
	}
	tok, err := s.mint(ctx)
	if err != nil {
		return "", err
	}
	s.token, s.mintedAt = tok, s.now()
	return tok, nil
}

// invalidate drops tok if it is still the cached one.
func (s *Tokens) Invalidate(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == tok {
		s.token = ""
	}
}

// Proxy adds the proxy and access headers to every request to a
// sandbox and sets Host to its endpoint. A 403 from the proxy itself (not
// from rayd) re-mints the auth token and retries once.
type Proxy struct {
	Base        http.RoundTripper
	Host        string
	Port        int
	Tokens      *Tokens
	AccessToken string
	// ForceH2 asks the proxy to speak h2c to rayd (RPCs); file transfers
	// go over HTTP/1.1, which crosses the AWS proxy much faster.
	ForceH2 bool
}

// RoundTrip sends req through the proxy.
func (t *Proxy) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, tok, err := t.send(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusForbidden && isProxyRejection(resp) && replayable(req) {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		t.Tokens.Invalidate(tok)
		if req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
		resp, _, err = t.send(req)
	}
	return resp, err
}

func (t *Proxy) send(req *http.Request) (*http.Response, string, error) {
	tok, err := t.Tokens.Get(req.Context())
	if err != nil {
		return nil, "", err
	}
	r := req.Clone(req.Context())
	r.Host = t.Host
	r.Header.Set(microvmsapi.ProxyAuthHeader, tok)
	r.Header.Set(microvmsapi.ProxyPortHeader, strconv.Itoa(t.Port))
	if t.ForceH2 {
		r.Header.Set(microvmsapi.ProxyForceH2Header, "true")
	}
	if t.AccessToken != "" {
		r.Header.Set("x-access-token", t.AccessToken)
	}
	resp, err := t.Base.RoundTrip(r)
	return resp, tok, err
}

// isProxyRejection tells the proxy's 403 (no gRPC status, not a Connect
// error body) from an answer of rayd.
func isProxyRejection(resp *http.Response) bool {
	if resp.Header.Get("grpc-status") != "" {
		return false
	}
	ct := resp.Header.Get("Content-Type")
	return !strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/connect")
}

func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// H2Config lets the peer send frames of up to 1 MiB: with the default
// 16 KiB, streaming output costs a system call per 16 KiB on the way.
func H2Config() *http.HTTP2Config {
	return &http.HTTP2Config{MaxReadFrameSize: 1 << 20}
}

// Set is the data plane's two transports: Base carries the RPCs, HTTP1
// the file endpoints and the sandbox's own ports.
type Set struct {
	Base, HTTP1 http.RoundTripper
	// Own: the Set is one sandbox's (its CA pool), not the process's.
	Own bool
}

// The process's shared transports: one pool of connections for every
// sandbox (locally every sandbox is reached through the platform's one
// address, so its connections serve them all), instead of a pool per
// sandbox that stayed open, idle, for 90 s after the sandbox was gone.
var (
	sharedLocal = sync.OnceValue(func() Set { return newSet(true, nil) })
	sharedAWS   = sync.OnceValue(func() Set { return newSet(false, nil) })
)

// For returns the shared transports, or a sandbox's own when it
// trusts a CA pool of its own (WithEndpointCAs).
func For(local bool, cas *x509.CertPool) Set {
	switch {
	case local:
		return sharedLocal()
	case cas == nil:
		return sharedAWS()
	}
	t := newSet(false, cas)
	t.Own = true
	return t
}

// newSet builds the transports of a backend (see newDataPlane).
func newSet(local bool, cas *x509.CertPool) Set {
	var h1 http.Protocols
	h1.SetHTTP1(true)
	if local {
		// No gzip: here compressing costs more than sending.
		t := &http.Transport{Protocols: &h1, MaxIdleConnsPerHost: 32, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
			WriteBufferSize: 256 << 10, ReadBufferSize: 256 << 10}
		return Set{Base: t, HTTP1: t}
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: cas}
	return Set{
		Base:  &http.Transport{Protocols: &p, TLSClientConfig: tlsCfg, ForceAttemptHTTP2: true, HTTP2: H2Config(), IdleConnTimeout: 90 * time.Second},
		HTTP1: &http.Transport{Protocols: &h1, TLSClientConfig: tlsCfg.Clone(), IdleConnTimeout: 90 * time.Second},
	}
}
