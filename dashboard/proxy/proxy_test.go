package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeUpstream is the sandbox's port: a real HTTP server on loopback
// that counts the connections dialed to it and records the raw bytes
// that reached it.
type fakeUpstream struct {
	t       testing.TB
	ln      net.Listener
	dials   atomic.Int64
	headers atomic.Int64
	mu      sync.Mutex
	raw     bytes.Buffer
	handler http.HandlerFunc
	number  int
}

type recConn struct {
	net.Conn
	u *fakeUpstream
}

func (c *recConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.u.mu.Lock()
	c.u.raw.Write(p[:n])
	c.u.mu.Unlock()
	return n, err
}

type recListener struct {
	net.Listener
	u *fakeUpstream
}

func (l *recListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.u.dials.Add(1)
	return &recConn{Conn: c, u: l.u}, nil
}

func newUpstream(t testing.TB, h http.HandlerFunc) *fakeUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &fakeUpstream{t: t, ln: ln, handler: h, number: 8000}
	if u.handler == nil {
		u.handler = func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Seen-Body", fmt.Sprint(len(b)))
			fmt.Fprintf(w, "hello %s %s", r.Method, r.URL.RequestURI())
		}
	}
	srv := &http.Server{Handler: u.handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(&recListener{Listener: ln, u: u}) }()
	t.Cleanup(func() { _ = srv.Close() })
	return u
}

func (u *fakeUpstream) Number() int { return u.number }
func (u *fakeUpstream) URL() string { return "http://" + u.ln.Addr().String() }
func (u *fakeUpstream) Headers(context.Context) (http.Header, error) {
	n := u.headers.Add(1)
	h := http.Header{}
	h.Set("Host", "sbx-endpoint.test")
	h.Set("x-aws-proxy-auth", fmt.Sprintf("port-token-%d", n))
	h.Set("x-aws-proxy-port", fmt.Sprint(u.number))
	return h, nil
}

func (u *fakeUpstream) seen() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.raw.String()
}

func start(t *testing.T, u *fakeUpstream, o Options) *Server {
	t.Helper()
	if o.SandboxID == "" {
		o.SandboxID = "microvm-abc"
	}
	s, err := New(u, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s
}

// exchange sends raw bytes on a new connection and returns everything
// the proxy answered until it closed the connection.
func exchange(t *testing.T, s *Server, raw string) string {
	t.Helper()
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("read: %v (got %q)", err, b)
	}
	return string(b)
}

func status(t *testing.T, answer string) int {
	t.Helper()
	var code int
	if _, err := fmt.Sscanf(answer, "HTTP/1.1 %d", &code); err != nil {
		t.Fatalf("no status line in %q", answer)
	}
	return code
}

func host(s *Server) string { return fmt.Sprintf("127.0.0.1:%d", s.Port()) }

func TestForwardsOneRequest(t *testing.T) {
	u := newUpstream(t, nil)
	s := start(t, u, Options{})
	ans := exchange(t, s, "GET /a/b?c=d HTTP/1.1\r\nHost: "+host(s)+"\r\nX-Custom: yes\r\n\r\n")
	if status(t, ans) != 200 || !strings.Contains(ans, "hello GET /a/b?c=d") || !strings.Contains(ans, "Connection: close\r\n") {
		t.Fatalf("answer %q", ans)
	}
	seen := u.seen()
	for _, want := range []string{"Host: sbx-endpoint.test\r\n", "X-Aws-Proxy-Auth: port-token-1\r\n", "X-Aws-Proxy-Port: 8000\r\n", "X-Custom: yes\r\n", "Connection: close\r\n"} {
		if !strings.Contains(seen, want) {
			t.Errorf("upstream did not get %q in %q", want, seen)
		}
	}
	if strings.Contains(seen, "Go-http-client") {
		t.Errorf("a User-Agent was added: %q", seen)
	}
	// <id>.localhost is accepted too.
	ans = exchange(t, s, fmt.Sprintf("GET / HTTP/1.1\r\nHost: microvm-abc.localhost:%d\r\nOrigin: http://microvm-abc.localhost:%d\r\n\r\n", s.Port(), s.Port()))
	if status(t, ans) != 200 {
		t.Fatalf("answer %q", ans)
	}
	// The port's headers are asked for per connection: a token the SDK
	// renewed in between is the one sent.
	if u.headers.Load() != 2 || !strings.Contains(u.seen(), "X-Aws-Proxy-Auth: port-token-2\r\n") {
		t.Errorf("Headers called %d times, want once per connection: %q", u.headers.Load(), u.seen())
	}
}

func TestRefusedBeforeUpstream(t *testing.T) {
	u := newUpstream(t, nil)
	s := start(t, u, Options{})
	h := host(s)
	cases := []struct {
		name, raw string
		want      int
	}{
		{"rebinding Host", "GET / HTTP/1.1\r\nHost: rebind.evil.com:" + fmt.Sprint(s.Port()) + "\r\n\r\n", 421},
		{"Host on another port", "GET / HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n", 421},
		{"Host with suffix", "GET / HTTP/1.1\r\nHost: localhost.evil.com:" + fmt.Sprint(s.Port()) + "\r\n\r\n", 421},
		{"foreign Origin", "GET / HTTP/1.1\r\nHost: " + h + "\r\nOrigin: https://evil.com\r\n\r\n", 403},
		{"null Origin", "GET / HTTP/1.1\r\nHost: " + h + "\r\nOrigin: null\r\n\r\n", 403},
		{"two Origins", "GET / HTTP/1.1\r\nHost: " + h + "\r\nOrigin: http://" + h + "\r\nOrigin: http://" + h + "\r\n\r\n", 403},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: " + h + "\r\nHost: " + h + "\r\n\r\n", 400},
		{"CL and TE", "POST / HTTP/1.1\r\nHost: " + h + "\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"two CL", "POST / HTTP/1.1\r\nHost: " + h + "\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc", 400},
		{"CL list", "POST / HTTP/1.1\r\nHost: " + h + "\r\nContent-Length: 3, 3\r\n\r\nabc", 400},
		{"CL sign", "POST / HTTP/1.1\r\nHost: " + h + "\r\nContent-Length: +3\r\n\r\nabc", 400},
		{"CL NEL", "POST / HTTP/1.1\r\nHost: " + h + "\r\nContent-Length: 12\x85\r\n\r\nabc", 400},
		{"TE gzip", "POST / HTTP/1.1\r\nHost: " + h + "\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 400},
		{"two TE", "POST / HTTP/1.1\r\nHost: " + h + "\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"bad chunk size", "POST / HTTP/1.1\r\nHost: " + h + "\r\nTransfer-Encoding: chunked\r\n\r\n0x3\r\nabc\r\n0\r\n\r\n", 400},
		{"chunk size with space", "POST / HTTP/1.1\r\nHost: " + h + "\r\nTransfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\n\r\n", 400},
		{"bare LF in head", "GET / HTTP/1.1\nHost: " + h + "\r\n\r\n", 400},
		{"bare LF in field", "GET / HTTP/1.1\r\nHost: " + h + "\nX-A: b\r\n\r\n", 400},
		{"bare CR", "GET / HTTP/1.1\r\nHost: " + h + "\r\nX-A: b\rc\r\n\r\n", 400},
		{"NUL", "GET / HTTP/1.1\r\nHost: " + h + "\r\nX-A: b\x00c\r\n\r\n", 400},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: " + h + "\r\nX-A: b\r\n c\r\n\r\n", 400},
		{"space before colon", "GET / HTTP/1.1\r\nHost: " + h + "\r\nX-A : b\r\n\r\n", 400},
		{"non-tchar name", "GET / HTTP/1.1\r\nHost: " + h + "\r\nX(A): b\r\n\r\n", 400},
		{"absolute-form", "GET http://evil.com/ HTTP/1.1\r\nHost: " + h + "\r\n\r\n", 400},
		{"CONNECT", "CONNECT evil.com:443 HTTP/1.1\r\nHost: " + h + "\r\n\r\n", 400},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400},
		{"huge header", "GET / HTTP/1.1\r\nHost: " + h + "\r\nX-A: " + strings.Repeat("a", 40<<10) + "\r\n\r\n", 431},
		{"huge CL", "POST / HTTP/1.1\r\nHost: " + h + "\r\nContent-Length: 99999999999\r\n\r\n", 413},
		{"Expect other", "POST / HTTP/1.1\r\nHost: " + h + "\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\na", 417},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := status(t, exchange(t, s, tc.raw)); got != tc.want {
				t.Fatalf("status %d, want %d", got, tc.want)
			}
		})
	}
	if n := u.dials.Load(); n != 0 {
		t.Fatalf("%d upstream dials for refused requests: %q", n, u.seen())
	}
	if n := u.headers.Load(); n != 0 {
		t.Fatalf("%d token requests for refused requests", n)
	}
	st := s.Stats()
	if st.Status[421] != 3 || st.Status[403] != 3 || st.Forwarded != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTooManyFields(t *testing.T) {
	u := newUpstream(t, nil)
	s := start(t, u, Options{})
	raw := "GET / HTTP/1.1\r\nHost: " + host(s) + "\r\n" + strings.Repeat("X-A: b\r\n", 101) + "\r\n"
	if got := status(t, exchange(t, s, raw)); got != 431 || u.dials.Load() != 0 {
		t.Fatalf("status %d, dials %d", got, u.dials.Load())
	}
}

func TestAllowedHostAndOrigin(t *testing.T) {
	u := newUpstream(t, nil)
	s := start(t, u, Options{AllowedHosts: []string{"dev.example"}, AllowOrigins: []string{"https://app.example"}})
	raw := fmt.Sprintf("GET / HTTP/1.1\r\nHost: dev.example:%d\r\nOrigin: https://app.example\r\n\r\n", s.Port())
	if got := status(t, exchange(t, s, raw)); got != 200 {
		t.Fatalf("status %d", got)
	}
}

func TestPipelinedSecondRequestNeverForwarded(t *testing.T) {
	u := newUpstream(t, nil)
	s := start(t, u, Options{})
	h := host(s)
	raw := "POST /first HTTP/1.1\r\nHost: " + h + "\r\nContent-Length: 5\r\n\r\nhello" +
		"GET /second HTTP/1.1\r\nHost: " + h + "\r\n\r\n"
	ans := exchange(t, s, raw)
	if status(t, ans) != 200 || !strings.Contains(ans, "hello POST /first") || strings.Contains(ans, "second") {
		t.Fatalf("answer %q", ans)
	}
	if strings.Count(ans, "HTTP/1.1 ") != 1 {
		t.Fatalf("more than one answer: %q", ans)
	}
	if seen := u.seen(); strings.Contains(seen, "second") || u.dials.Load() != 1 {
		t.Fatalf("upstream got %q in %d dials", seen, u.dials.Load())
	}
	// The same with a chunked body.
	raw = "POST /first HTTP/1.1\r\nHost: " + h + "\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n" +
		"GET /second HTTP/1.1\r\nHost: " + h + "\r\n\r\n"
	ans = exchange(t, s, raw)
	if status(t, ans) != 200 || !strings.Contains(ans, "X-Seen-Body: 5") {
		t.Fatalf("answer %q", ans)
	}
	if seen := u.seen(); strings.Contains(seen, "second") || strings.Contains(seen, "X-Trailer") {
		t.Fatalf("upstream got %q", seen)
	}
}

func TestStripsProxyHeadersAndDashboardCookies(t *testing.T) {
	u := newUpstream(t, nil)
	s := start(t, u, Options{})
	raw := "GET / HTTP/1.1\r\nHost: " + host(s) + "\r\n" +
		"X-Aws-Proxy-Auth: forged\r\nx-aws-proxy-port: 9000\r\nX-AWS-PROXY-OTHER: x\r\n" +
		"Cookie: a=1; rayito_dashboard_8080=secret; b=2\r\nCookie: rayito_dashboard_1=s2\r\n" +
		"Connection: keep-alive, X-Hop\r\nX-Hop: h\r\nKeep-Alive: timeout=5\r\nProxy-Authorization: Basic eA==\r\n\r\n"
	if got := status(t, exchange(t, s, raw)); got != 200 {
		t.Fatalf("status %d", got)
	}
	seen := u.seen()
	for _, bad := range []string{"forged", "9000", "X-Aws-Proxy-Other", "secret", "s2", "X-Hop", "Keep-Alive", "Proxy-Authorization"} {
		if strings.Contains(strings.ToLower(seen), strings.ToLower(bad)) {
			t.Errorf("upstream got %q: %q", bad, seen)
		}
	}
	if !strings.Contains(seen, "Cookie: a=1; b=2\r\n") || strings.Count(seen, "X-Aws-Proxy-Auth: ") != 1 {
		t.Errorf("upstream got %q", seen)
	}
}

func TestResponseDashboardCookieDropped(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Set-Cookie", "rayito_dashboard_8080=x; Path=/")
		w.Header().Add("Set-Cookie", "app=1")
	})
	s := start(t, u, Options{})
	ans := exchange(t, s, "GET / HTTP/1.1\r\nHost: "+host(s)+"\r\n\r\n")
	if strings.Contains(ans, "rayito_dashboard") || !strings.Contains(ans, "Set-Cookie: app=1") {
		t.Fatalf("answer %q", ans)
	}
}

func TestMaxConnections(t *testing.T) {
	u := newUpstream(t, nil)
	s := start(t, u, Options{MaxConnections: 2})
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	// Both held connections are accepted (their slots taken) before the
	// third dials.
	deadline := time.Now().Add(5 * time.Second)
	for s.Stats().Connections < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	ans := exchange(t, s, "GET / HTTP/1.1\r\nHost: "+host(s)+"\r\n\r\n")
	if status(t, ans) != 503 || u.dials.Load() != 0 {
		t.Fatalf("answer %q, dials %d", ans, u.dials.Load())
	}
	// Once one is done, a new connection is served.
	_, _ = io.WriteString(held[0], "GET / HTTP/1.1\r\nHost: "+host(s)+"\r\n\r\n")
	_, _ = io.ReadAll(held[0])
	deadline = time.Now().Add(5 * time.Second)
	for {
		ans = exchange(t, s, "GET / HTTP/1.1\r\nHost: "+host(s)+"\r\n\r\n")
		if status(t, ans) == 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status(t, ans) != 200 {
		t.Fatalf("answer %q", ans)
	}
}

func TestSlowClientDropped(t *testing.T) {
	u := newUpstream(t, nil)
	s := start(t, u, Options{HeaderTimeout: 300 * time.Millisecond})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: ")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if len(b) != 0 || time.Since(start) > 3*time.Second || u.dials.Load() != 0 {
		t.Fatalf("got %q after %s, dials %d", b, time.Since(start), u.dials.Load())
	}
	// A body that stalls is dropped too, after IdleTimeout.
	s2 := start2(t, u, Options{IdleTimeout: 300 * time.Millisecond})
	c2, err := net.Dial("tcp", s2.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	_, _ = io.WriteString(c2, "POST / HTTP/1.1\r\nHost: "+host(s2)+"\r\nContent-Length: 10\r\n\r\nab")
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(c2); err != nil {
		t.Fatalf("read: %v", err)
	}
}

var start2 = start

func TestUpgradeRefusedByUpstream(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no websocket here", http.StatusBadRequest)
	})
	s := start(t, u, Options{})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: "+host(s)+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nRAW-FRAME-BYTES")
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	ans := string(b)
	if status(t, ans) != 400 || !strings.Contains(ans, "Connection: close\r\n") {
		t.Fatalf("answer %q", ans)
	}
	if seen := u.seen(); strings.Contains(seen, "RAW-FRAME") || !strings.Contains(seen, "Upgrade: websocket") {
		t.Fatalf("upstream got %q", seen)
	}
}

func TestUpgradeAcceptedRelaysBytes(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want upgrade", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n")
		_ = brw.Flush()
		// Echo each line, upper-cased, until "bye".
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			_, _ = brw.WriteString(strings.ToUpper(line))
			_ = brw.Flush()
			if line == "bye\n" {
				return
			}
		}
	})
	s := start(t, u, Options{})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: "+host(s)+"\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\nOrigin: http://"+host(s)+"\r\n\r\nfirst\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "websocket" || resp.Header.Get("Sec-Websocket-Accept") != "x" {
		t.Fatalf("response %+v", resp)
	}
	for _, msg := range []string{"first\n", "second\n", "bye\n"} {
		if msg != "first\n" {
			_, _ = io.WriteString(c, msg)
		}
		got, err := br.ReadString('\n')
		if err != nil || got != strings.ToUpper(msg) {
			t.Fatalf("relayed %q, %v; want %q", got, err, strings.ToUpper(msg))
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("tunnel not closed after the upstream closed: %v", err)
	}
	if st := s.Stats(); st.Tunnels != 1 || st.Status[101] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestExpectContinue(t *testing.T) {
	u := newUpstream(t, nil)
	s := start(t, u, Options{})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(c, "PUT /f HTTP/1.1\r\nHost: "+host(s)+"\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n")
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	if line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("got %q", line)
	}
	_, _ = br.ReadString('\n')
	_, _ = io.WriteString(c, "abc")
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "X-Seen-Body: 3") {
		t.Fatalf("got %q", rest)
	}
}

func TestOptions(t *testing.T) {
	u := newUpstream(t, nil)
	for _, port := range []int{0, -1, 9000, 65536} {
		u.number = port
		if _, err := New(u, Options{}); !errors.Is(err, ErrPort) {
			t.Errorf("port %d: %v", port, err)
		}
	}
	u.number = 8000
	if _, err := New(u, Options{Bind: "0.0.0.0"}); !errors.Is(err, ErrRemote) {
		t.Errorf("remote bind: %v", err)
	}
	for _, o := range []Options{{Bind: "localhost"}, {AllowedHosts: []string{"a:80"}}, {AllowOrigins: []string{"null"}}, {SandboxID: "a.b"}, {MaxConnections: -1}, {ListenPort: 70000}} {
		if _, err := New(u, o); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	s, err := New(u, Options{Bind: "0.0.0.0", AllowRemote: true, SandboxID: "Microvm-X"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	urls := s.URLs()
	if len(urls) != 2 || urls[0] != fmt.Sprintf("http://microvm-x.localhost:%d/", s.Port()) || urls[1] != fmt.Sprintf("http://0.0.0.0:%d/", s.Port()) {
		t.Fatalf("URLs %v", urls)
	}
	if u.headers.Load() != 0 || u.dials.Load() != 0 {
		t.Fatal("New called the upstream")
	}
	if IsLoopback("0.0.0.0") || !IsLoopback("::1") || !IsLoopback("") || !IsLoopback("127.0.0.2") {
		t.Fatal("IsLoopback")
	}
}

// A tunnel stays open while bytes pass either way (here only from the
// upstream, longer than IdleTimeout), and closes after TunnelIdleTimeout
// of silence both ways.
func TestTunnelIdle(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		_ = brw.Flush()
		for range 8 {
			time.Sleep(100 * time.Millisecond)
			_, _ = brw.WriteString("tick\n")
			_ = brw.Flush()
		}
		// Then silence until the proxy closes.
		_, _ = io.Copy(io.Discard, brw)
	})
	s := start(t, u, Options{IdleTimeout: 250 * time.Millisecond, TunnelIdleTimeout: time.Second})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: "+host(s)+"\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("%v %v", resp, err)
	}
	for i := range 8 {
		if line, err := br.ReadString('\n'); err != nil || line != "tick\n" {
			t.Fatalf("tick %d: %q %v", i, line, err)
		}
	}
	began := time.Now()
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle tunnel: %v", err)
	}
	if d := time.Since(began); d < 500*time.Millisecond || d > 5*time.Second {
		t.Fatalf("idle tunnel closed after %s, want about 1 s", d)
	}
}

// A client that keeps sending after its request (pipelined requests, a
// body larger than it said) still reads the whole answer: the proxy
// half-closes and drains a little before it closes, so that no reset
// destroys the answer in flight. What it drains never reaches the
// upstream.
func TestAnswerSurvivesTrailingBytes(t *testing.T) {
	u := newUpstream(t, nil)
	s := start(t, u, Options{})
	for i := range 5 {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		junk := strings.Repeat("GET /junk HTTP/1.1\r\nHost: "+host(s)+"\r\n\r\n", 2000)
		go func() { _, _ = io.WriteString(c, "GET /first HTTP/1.1\r\nHost: "+host(s)+"\r\n\r\n"+junk) }()
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || !strings.Contains(string(b), "hello GET /first") {
			t.Fatalf("try %d: %v, got %q", i, err, b)
		}
	}
	if strings.Contains(u.seen(), "junk") {
		t.Fatal("drained bytes reached the upstream")
	}
}

// tlsUpstream is an AWS-like port: https://<endpoint>, the Host and auth
// headers from Headers.
type tlsUpstream struct{ url string }

func (u tlsUpstream) Number() int { return 8888 }
func (u tlsUpstream) URL() string { return u.url }
func (u tlsUpstream) Headers(context.Context) (http.Header, error) {
	h := http.Header{}
	h.Set("Host", "abc.sandbox.aws.test")
	h.Set("x-aws-proxy-auth", "jwe")
	h.Set("x-aws-proxy-port", "8888")
	return h, nil
}

// On AWS the port's URL is https: the proxy speaks TLS (HTTP/1.1) to it,
// with the endpoint's Host and the port's headers.
func TestHTTPSUpstream(t *testing.T) {
	var got atomic.Value
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(fmt.Sprintf("%s %s %s %s %s", r.Proto, r.Host, r.Header.Get("X-Aws-Proxy-Auth"), r.Header.Get("X-Aws-Proxy-Port"), r.URL.RequestURI()))
		fmt.Fprint(w, "over tls")
	}))
	defer ts.Close()
	s, err := New(tlsUpstream{url: ts.URL}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.tr.TLSClientConfig = ts.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	defer func() { cancel(); <-done }()
	ans := exchange(t, s, "GET /lab?x=1 HTTP/1.1\r\nHost: "+host(s)+"\r\n\r\n")
	if status(t, ans) != 200 || !strings.HasSuffix(ans, "over tls") {
		t.Fatalf("answer %q", ans)
	}
	if g, _ := got.Load().(string); g != "HTTP/1.1 abc.sandbox.aws.test jwe 8888 /lab?x=1" {
		t.Fatalf("upstream saw %q", g)
	}
}
