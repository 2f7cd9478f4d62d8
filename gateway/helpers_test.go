package gateway

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	canary      = "sk-CANARY-0123456789abcdef"
	canaryPH    = "PH_CANARY_placeholder_0123456789"
	upstreamDNS = "example.com" // the httptest certificate is valid for it
)

// seen is what the test upstream received.
type seen struct {
	RequestURI string
	Host       string
	Header     http.Header
}

type testUpstream struct {
	*httptest.Server
	mu    sync.Mutex
	reqs  []seen
	hits  atomic.Int64
	port  uint16
	extra func(w http.ResponseWriter, r *http.Request) bool // true = handled
}

func newTestUpstream(t *testing.T) *testUpstream {
	u := &testUpstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{RequestURI: r.RequestURI, Host: r.Host, Header: r.Header.Clone()})
		extra := u.extra
		u.mu.Unlock()
		if extra != nil && extra(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "ok")
	}))
	u.Config.ErrorLog = discardLog
	u.StartTLS()
	t.Cleanup(u.Close)
	p, _ := strconv.Atoi(u.URL[strings.LastIndexByte(u.URL, ':')+1:])
	u.port = uint16(p)
	return u
}

func (u *testUpstream) setExtra(f func(w http.ResponseWriter, r *http.Request) bool) {
	u.mu.Lock()
	u.extra = f
	u.mu.Unlock()
}

func (u *testUpstream) last(t *testing.T) seen {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		t.Fatal("upstream received nothing")
	}
	return u.reqs[len(u.reqs)-1]
}

func (u *testUpstream) upstreamURL() string {
	return "https://" + upstreamDNS + ":" + strconv.Itoa(int(u.port))
}

// logBuf captures every log record.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type env struct {
	g     *Gateway
	up    *testUpstream
	dials atomic.Int64
	logs  *logBuf
	now   atomic.Pointer[time.Time]
}

func (e *env) advance(d time.Duration) {
	t := e.now.Load().Add(d)
	e.now.Store(&t)
}

func newEnv(t *testing.T, mod func(*Options)) *env {
	t.Helper()
	return newEnvWith(t, newTestUpstream(t), mod)
}

func newEnvWith(t *testing.T, up *testUpstream, mod func(*Options)) *env {
	t.Helper()
	e := &env{up: up, logs: &logBuf{}}
	start := time.Now()
	e.now.Store(&start)
	pool := x509.NewCertPool()
	pool.AddCert(e.up.Certificate())
	var d net.Dialer
	opts := Options{
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			if host == upstreamDNS || host == "other.test" {
				return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
			}
			return nil, fmt.Errorf("no such host")
		},
		Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
			e.dials.Add(1)
			return d.DialContext(ctx, network, address)
		},
		Blocked: func(a netip.Addr) bool { return a == metadataV4 },
		RootCAs: pool,
		Now:     func() time.Time { return *e.now.Load() },
		Logger:  slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mod != nil {
		mod(&opts)
	}
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.g = g
	t.Cleanup(func() { g.Close() })
	return e
}

func (e *env) route(name string) RouteStatus {
	for _, r := range e.g.Routes() {
		if r.Name == name {
			return r
		}
	}
	return RouteStatus{}
}

func basicRoute(e *env, name string) Route {
	return Route{
		Name:     name,
		Upstream: e.up.upstreamURL(),
		Headers: []Header{
			{Name: "x-api-key", Secret: canary},
			{Name: "Authorization", Prefix: "Bearer ", Secret: canary + "-bearer"},
		},
		Rules: []Rule{{Method: "*", Path: "/*"}},
	}
}

// rawDo sends one request with a raw request-target and returns the
// response with its body read.
func rawDo(t *testing.T, port uint16, method, target string, hdr ...string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n")
	for _, h := range hdr {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(body)
}

func wantRefusal(t *testing.T, resp *http.Response, body string, status int, class string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d (body %q)", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(body), &m); err != nil || m["error"] != class || len(m) != 1 {
		t.Fatalf("body %q, want class %s", body, class)
	}
}

// waitGoroutines waits until the goroutine count is back to base.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= base {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutines: %d, baseline %d\n%s", n, base, buf)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
