package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/activity"
	"github.com/rayito-dev/rayito/localvm/internal/authtoken"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

const (
	suffix   = ".microvms.localhost"
	endpoint = "vm1" + suffix
	vmID     = "microvm-1"
)

// clock is a settable fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// target is a fake microVM whose every port is addr (or err).
type target struct {
	id      string
	running bool // under mu once in use
	addr    string
	err     error
	// autoResume: Wake makes the target running after wakeDelay, or
	// fails with wakeErr.
	autoResume bool
	wakeDelay  time.Duration
	wakeErr    error
	meter      activity.Meter

	mu    sync.Mutex
	ports []int // Addr calls
	wakes int
}

func (t *target) MicrovmID() string { return t.id }
func (t *target) Running() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.running
}
func (t *target) AutoResume() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.running && t.autoResume
}
func (t *target) Wake(ctx context.Context) error {
	t.mu.Lock()
	t.wakes++
	running, auto := t.running, t.autoResume
	t.mu.Unlock()
	if running {
		return nil
	}
	if !auto || t.wakeErr != nil {
		return errors.New("not running")
	}
	select {
	case <-time.After(t.wakeDelay):
	case <-ctx.Done():
		return ctx.Err()
	}
	t.mu.Lock()
	t.running = true
	t.mu.Unlock()
	return nil
}
func (t *target) Activity() *activity.Meter { return &t.meter }
func (t *target) wakeCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wakes
}
func (t *target) Addr(port int) (string, error) {
	t.mu.Lock()
	t.ports = append(t.ports, port)
	t.mu.Unlock()
	return t.addr, t.err
}

func (t *target) calls() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.ports)
}

// upstream is a guest app: h1 and h2c unless h1Only.
type upstream struct {
	srv      *httptest.Server
	hits     atomic.Int64
	lastSent atomic.Int64 // UnixNano when /stream sent its last chunk
}

// echo is what /echo answers.
type echo struct {
	Method string              `json:"method"`
	Host   string              `json:"host"`
	Proto  int                 `json:"proto"`
	Header map[string][]string `json:"header"`
	Body   string              `json:"body"`
}

func newUpstream(t *testing.T, h1Only bool) *upstream {
	u := &upstream{}
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(echo{r.Method, r.Host, r.ProtoMajor, r.Header, string(body)})
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for i := 1; i <= 3; i++ {
			if i > 1 {
				time.Sleep(100 * time.Millisecond)
			}
			if i == 3 {
				u.lastSent.Store(time.Now().UnixNano())
			}
			fmt.Fprintf(w, "chunk-%d\n", i)
			rc.Flush()
		}
	})
	mux.HandleFunc("/grpc", func(w http.ResponseWriter, r *http.Request) {
		req, _ := io.ReadAll(r.Body)
		w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set("X-Proto", fmt.Sprint(r.ProtoMajor))
		w.Header().Set("X-Te", r.Header.Get("Te"))
		w.Write(append([]byte("reply:"), req...))
		http.NewResponseController(w).Flush()
		w.Header().Set("Grpc-Status", "0")
		w.Header().Set("Grpc-Message", "ok")
		w.Header().Set(http.TrailerPrefix+"X-Late", "late")
	})
	mux.HandleFunc("/duplex", func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		rc.EnableFullDuplex()
		w.WriteHeader(200)
		rc.Flush()
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			fmt.Fprintf(w, "echo:%s\n", sc.Text())
			rc.Flush()
		}
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "test" {
			http.Error(w, "want upgrade", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
		brw.Flush()
		for {
			line, err := brw.ReadString('\n')
			if err != nil {
				return
			}
			brw.WriteString("ws:" + line)
			brw.Flush()
		}
	})
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		mux.ServeHTTP(w, r)
	})
	u.srv = httptest.NewUnstartedServer(counted)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(!h1Only)
	u.srv.Config.Protocols = &p
	u.srv.Start()
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) addr() string { return u.srv.Listener.Addr().String() }

// env is a proxy in front of fake microVMs.
type env struct {
	clock   *clock
	minter  *authtoken.Minter
	up      *upstream
	vm      *target
	targets map[string]*target
	proxy   *Proxy
	srv     *httptest.Server
	logs    *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newEnv(t *testing.T, verifier Verifier) *env {
	t.Helper()
	e := &env{clock: &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}, logs: &syncBuffer{}}
	var err error
	e.minter, err = authtoken.NewMinter(authtoken.NewKey(), e.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	if verifier == nil {
		verifier = e.minter
	}
	e.up = newUpstream(t, false)
	h1only := newUpstream(t, true)

	// A port nobody listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := l.Addr().String()
	l.Close()

	e.vm = &target{id: vmID, running: true, addr: e.up.addr()}
	e.targets = map[string]*target{
		endpoint:                 e.vm,
		"h1only" + suffix:        {id: "microvm-h1only", running: true, addr: h1only.addr()},
		"stopped" + suffix:       {id: "microvm-stopped", running: false, addr: e.up.addr()},
		"down" + suffix:          {id: "microvm-down", running: true, addr: downAddr},
		"unreachable" + suffix:   {id: "microvm-unreachable", running: true, err: errors.New("no route")},
		"other-vm-down" + suffix: {id: "microvm-other", running: true, addr: downAddr},
		"full" + suffix:          {id: "microvm-full", running: true, addr: closingListener(t)},
	}
	e.proxy = New(Options{
		Lookup: func(ep string) (Target, bool) {
			tg, ok := e.targets[ep]
			if !ok {
				return nil, false
			}
			return tg, true
		},
		Verifier:       verifier,
		Logger:         slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		EndpointSuffix: suffix,
	})
	e.srv = httptest.NewUnstartedServer(e.proxy)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	e.srv.Config.Protocols = &p
	// net/http's own messages (a recovered panic among them) land in the
	// logs too.
	e.srv.Config.ErrorLog = log.New(e.logs, "server: ", 0)
	e.srv.Start()
	t.Cleanup(func() {
		e.srv.Close()
		e.proxy.Close()
	})
	return e
}

func (e *env) token(t *testing.T, id string, ttl time.Duration, ports ...microvmsapi.AllowedPort) string {
	t.Helper()
	tok, _, err := e.minter.Mint(id, ports, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func onePort(p int) microvmsapi.AllowedPort { return microvmsapi.AllowedPort{Port: &p} }

func allPorts() microvmsapi.AllowedPort { return microvmsapi.AllowedPort{AllPorts: &struct{}{}} }

func portRange(a, b int) microvmsapi.AllowedPort {
	return microvmsapi.AllowedPort{Range: &microvmsapi.PortRange{StartPort: a, EndPort: b}}
}

func client(h2c bool) *http.Client {
	var p http.Protocols
	if h2c {
		p.SetUnencryptedHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	return &http.Client{Transport: &http.Transport{Protocols: &p, DisableCompression: true}}
}

// request builds a request to the proxy for host.
func (e *env) request(t *testing.T, method, host, path string, body io.Reader, hdr map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

func do(t *testing.T, c *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}

func TestRejections(t *testing.T) {
	type tc struct {
		name     string
		host     string
		hdr      func(e *env) map[string]string
		verifier Verifier
		setup    func(e *env)
		want     int
	}
	tokFor := func(id string, ports ...microvmsapi.AllowedPort) func(e *env) map[string]string {
		return func(e *env) map[string]string {
			tok, _, err := e.minter.Mint(id, ports, time.Hour)
			if err != nil {
				panic(err)
			}
			return map[string]string{microvmsapi.ProxyAuthHeader: tok}
		}
	}
	withPort := func(f func(e *env) map[string]string, port string) func(e *env) map[string]string {
		return func(e *env) map[string]string {
			h := f(e)
			h[microvmsapi.ProxyPortHeader] = port
			return h
		}
	}
	good := tokFor(vmID, onePort(8080), portRange(3000, 3010))
	cases := []tc{
		{name: "no token", host: endpoint, hdr: func(*env) map[string]string { return nil }, want: 403},
		{name: "empty token", host: endpoint, hdr: func(*env) map[string]string { return map[string]string{"X-Aws-Proxy-Auth": ""} }, want: 403},
		{name: "garbage token", host: endpoint, hdr: func(*env) map[string]string { return map[string]string{"X-Aws-Proxy-Auth": "a.b.c.d.e"} }, want: 403},
		{name: "expired token", host: endpoint, hdr: good, setup: func(e *env) { e.clock.Advance(time.Hour) }, want: 403},
		{name: "token for another microvm", host: endpoint, hdr: tokFor("microvm-other", onePort(8080)), want: 403},
		{name: "port not in token", host: endpoint, hdr: withPort(good, "3011"), want: 403},
		{name: "default port not in token", host: endpoint, hdr: tokFor(vmID, onePort(3000)), want: 403},
		{name: "port 9000 with allPorts", host: endpoint, hdr: withPort(tokFor(vmID, allPorts()), "9000"), want: 403},
		{name: "port 9000 in range", host: endpoint, hdr: withPort(tokFor(vmID, portRange(8000, 9100)), "9000"), want: 403},
		{name: "port 09000 with allPorts", host: endpoint, hdr: withPort(tokFor(vmID, allPorts()), "09000"), want: 403},
		{name: "port 9000 with a verifier that allows all", host: endpoint, verifier: allowAll{},
			hdr: func(*env) map[string]string {
				return map[string]string{"X-Aws-Proxy-Auth": "x", "X-Aws-Proxy-Port": "9000"}
			}, want: 403},
		{name: "unknown endpoint", host: "nope" + suffix, hdr: good, want: 404},
		{name: "no endpoint", host: "", hdr: good, want: 404},
		{name: "not running", host: "stopped" + suffix, hdr: good, want: 502},
		{name: "not running, no token", host: "stopped" + suffix, hdr: func(*env) map[string]string { return nil }, want: 502},
		{name: "upstream down", host: "other-vm-down" + suffix, hdr: tokFor("microvm-other", onePort(8080)), want: 502},
		{name: "addr error", host: "unreachable" + suffix, hdr: tokFor("microvm-unreachable", onePort(8080)), want: 502},
		{name: "force-h2 to an HTTP/1.1-only app", host: "h1only" + suffix,
			hdr: func(e *env) map[string]string {
				h := tokFor("microvm-h1only", onePort(8080))(e)
				h[microvmsapi.ProxyForceH2Header] = "true"
				return h
			}, want: 502},
	}
	for _, p := range []string{"80a", "0", "65536", "-1", "+80", "0x50", "8080,8080", "8080 8080", "99999", "123456", "８０８０", " "} {
		cases = append(cases, tc{name: "bad port " + p, host: endpoint, hdr: withPort(good, p), want: 400})
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, tt.verifier)
			hdr := tt.hdr(e)
			if tt.setup != nil {
				tt.setup(e)
			}
			for _, h2c := range []bool{false, true} {
				req := e.request(t, "GET", tt.host, "/echo", nil, hdr)
				res, body := do(t, client(h2c), req)
				if res.StatusCode != tt.want {
					t.Fatalf("h2c=%v: status %d, want %d; body %s", h2c, res.StatusCode, tt.want, body)
				}
				var msg struct{ Message string }
				if err := json.Unmarshal(body, &msg); err != nil || msg.Message == "" {
					t.Errorf("body %q is not {\"message\": ...}", body)
				}
				if ct := res.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("content type %q", ct)
				}
				if tok := hdr[microvmsapi.ProxyAuthHeader]; len(tok) > 3 && strings.Contains(string(body), tok) {
					t.Error("the body echoes the token")
				}
			}
			if n := e.up.hits.Load(); n != 0 {
				t.Errorf("upstream reached %d times", n)
			}
			for _, tg := range e.targets {
				if slices.Contains(tg.calls(), microvmsapi.HooksPort) {
					t.Error("Addr(9000) was called")
				}
			}
		})
	}
}

type allowAll struct{}

func (allowAll) Verify(token, id string, port int) (*authtoken.Claims, error) {
	return &authtoken.Claims{MicrovmID: id}, nil
}

func TestDuplicateProxyHeadersRefused(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token(t, vmID, time.Hour, allPorts())
	for _, tt := range []struct {
		name, extra string
		want        int
	}{
		{"two ports", "x-aws-proxy-port: 8080\r\nX-AWS-PROXY-PORT: 8080\r\n", 400},
		{"ports 8080 and 9000", "x-aws-proxy-port: 8080\r\nX-AWS-PROXY-PORT: 9000\r\n", 400},
		{"two tokens", "X-AWS-Proxy-Auth: " + tok + "\r\n", 403},
	} {
		res := rawRequest(t, e, "GET /echo HTTP/1.1\r\nHost: "+endpoint+"\r\nx-aws-proxy-auth: "+tok+"\r\n"+tt.extra+"Connection: close\r\n\r\n")
		if res.StatusCode != tt.want {
			t.Errorf("%s: status %d, want %d", tt.name, res.StatusCode, tt.want)
		}
	}
	if n := e.up.hits.Load(); n != 0 {
		t.Errorf("upstream reached %d times", n)
	}
}

// rawRequest sends raw bytes to the proxy and reads one response.
func rawRequest(t *testing.T, e *env, raw string) *http.Response {
	t.Helper()
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res
}

func decodeEcho(t *testing.T, body []byte) echo {
	t.Helper()
	var got echo
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("echo %q: %v", body, err)
	}
	return got
}

func checkNoProxyHeaders(t *testing.T, got echo) {
	t.Helper()
	for k := range got.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-aws-proxy-") || strings.EqualFold(k, EndpointHeader) {
			t.Errorf("upstream received %s", k)
		}
	}
}

func TestHeadersStrippedRaw(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token(t, vmID, time.Hour, onePort(8080), onePort(3000))
	raw := "POST /echo?q=1 HTTP/1.1\r\n" +
		"Host: VM1.Microvms.Localhost:8443\r\n" +
		"X-aWs-PrOxY-aUtH: " + tok + "\r\n" +
		"x-AWS-proxy-PORT: 3000\r\n" +
		"X-Aws-Proxy-Force-H2: false\r\n" +
		"x-aws-proxy-extra: one\r\n" +
		"X-AWS-PROXY-EXTRA: two\r\n" +
		"X-Aws-Proxy-: empty-suffix\r\n" +
		"X-Custom: kept\r\n" +
		"X-Forwarded-For: 6.6.6.6\r\n" +
		"Connection: close, X-Hop\r\n" +
		"X-Hop: dropped\r\n" +
		"Keep-Alive: timeout=5\r\n" +
		"Content-Length: 5\r\n" +
		"\r\n" +
		"hello"
	res := rawRequest(t, e, raw)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	got := decodeEcho(t, body)
	checkNoProxyHeaders(t, got)
	if got.Host != endpoint {
		t.Errorf("upstream Host %q, want %q", got.Host, endpoint)
	}
	if got.Method != "POST" || got.Body != "hello" || got.Proto != 1 {
		t.Errorf("echo = %+v", got)
	}
	if v := got.Header["X-Custom"]; len(v) != 1 || v[0] != "kept" {
		t.Errorf("X-Custom = %q", v)
	}
	for _, h := range []string{"X-Hop", "Keep-Alive", "X-Forwarded-For", "Connection"} {
		if _, ok := got.Header[h]; ok {
			t.Errorf("upstream received %s", h)
		}
	}
	if c := e.vm.calls(); !slices.Equal(c, []int{3000}) {
		t.Errorf("Addr calls %v, want [3000]", c)
	}
}

func TestHeadersStrippedH2C(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token(t, vmID, time.Hour, onePort(8080))
	for _, force := range []bool{false, true} {
		req := e.request(t, "PUT", endpoint, "/echo", strings.NewReader("body"), nil)
		req.Header["x-aws-proxy-auth"] = []string{tok}
		req.Header["X-Aws-Proxy-Port"] = []string{"8080"}
		req.Header["x-aws-proxy-whatever"] = []string{"a", "b"}
		req.Header["X-Aws-Proxy-Whatever"] = []string{"c"}
		req.Header["X-Rayito-Endpoint"] = []string{endpoint}
		req.Header.Set("X-Custom", "kept")
		if force {
			req.Header.Set("x-aws-proxy-force-h2", "TRUE")
		}
		res, body := do(t, client(true), req)
		if res.StatusCode != 200 {
			t.Fatalf("status %d: %s", res.StatusCode, body)
		}
		got := decodeEcho(t, body)
		checkNoProxyHeaders(t, got)
		wantProto := 1
		if force {
			wantProto = 2
		}
		if got.Host != endpoint || got.Body != "body" || got.Method != "PUT" || got.Proto != wantProto {
			t.Errorf("force=%v: echo = %+v", force, got)
		}
		if got.Header["X-Custom"][0] != "kept" {
			t.Error("X-Custom lost")
		}
	}
}

func TestEndpointHeaderRouting(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token(t, vmID, time.Hour, onePort(8080))
	host := e.srv.Listener.Addr().String() // not an endpoint
	req := e.request(t, "GET", host, "/echo", nil, map[string]string{
		EndpointHeader:              endpoint,
		microvmsapi.ProxyAuthHeader: tok,
	})
	if !e.proxy.Match(req) {
		t.Error("Match is false with the endpoint header")
	}
	res, body := do(t, client(false), req)
	if res.StatusCode != 200 {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	got := decodeEcho(t, body)
	checkNoProxyHeaders(t, got)
	if got.Host != endpoint {
		t.Errorf("upstream Host %q", got.Host)
	}
	// The header wins over Host.
	req = e.request(t, "GET", endpoint, "/echo", nil, map[string]string{
		EndpointHeader:              "nope" + suffix,
		microvmsapi.ProxyAuthHeader: tok,
	})
	if res, _ := do(t, client(false), req); res.StatusCode != 404 {
		t.Errorf("status %d, want 404", res.StatusCode)
	}
}

func TestMatch(t *testing.T) {
	p := New(Options{
		Lookup:         func(string) (Target, bool) { return nil, false },
		Verifier:       allowAll{},
		EndpointSuffix: ".Microvms.Localhost",
	})
	for host, want := range map[string]bool{
		"abc.microvms.localhost":       true,
		"abc.microvms.localhost:8443":  true,
		"ABC.MICROVMS.LOCALHOST":       true,
		"abc.microvms.localhost.":      true,
		".microvms.localhost":          false,
		"microvms.localhost":           false,
		"localhost:8080":               false,
		"abc.microvms.localhost.evil":  false,
		"127.0.0.1:9000":               false,
		"[::1]:443":                    false,
		"":                             false,
		"abcmicrovms.localhost":        false,
		"x.y.microvms.localhost:65535": true,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = host
		if got := p.Match(r); got != want {
			t.Errorf("Match(Host %q) = %v, want %v", host, got, want)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "127.0.0.1"
	r.Header.Set("X-Rayito-Endpoint", "whatever")
	if !p.Match(r) {
		t.Error("endpoint header not matched")
	}
	noSuffix := New(Options{Lookup: p.lookup, Verifier: allowAll{}})
	r = httptest.NewRequest("GET", "/", nil)
	r.Host = "abc.microvms.localhost"
	if noSuffix.Match(r) {
		t.Error("matched without a suffix configured")
	}
}

func TestStreaming(t *testing.T) {
	for _, mode := range []struct {
		name       string
		h2c, force bool
	}{{"h1", false, false}, {"h2c-in h1-up", true, false}, {"h2c both", true, true}, {"h1-in h2c-up", false, true}} {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, nil)
			hdr := map[string]string{microvmsapi.ProxyAuthHeader: e.token(t, vmID, time.Hour, onePort(8080))}
			if mode.force {
				hdr[microvmsapi.ProxyForceH2Header] = "true"
			}
			res, err := client(mode.h2c).Do(e.request(t, "GET", endpoint, "/stream", nil, hdr))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("status %d", res.StatusCode)
			}
			br := bufio.NewReader(res.Body)
			first, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			firstAt := time.Now()
			rest, err := io.ReadAll(br)
			if err != nil {
				t.Fatal(err)
			}
			if first+string(rest) != "chunk-1\nchunk-2\nchunk-3\n" {
				t.Errorf("body %q", first+string(rest))
			}
			lastSent := time.Unix(0, e.up.lastSent.Load())
			if !firstAt.Before(lastSent) {
				t.Errorf("first chunk arrived %v after the last was sent: the proxy buffers", firstAt.Sub(lastSent))
			}
		})
	}
}

func TestTrailers(t *testing.T) {
	for _, mode := range []struct {
		name       string
		h2c, force bool
	}{{"h1", false, false}, {"h2c both", true, true}, {"h2c-in h1-up", true, false}, {"h1-in h2c-up", false, true}} {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, nil)
			hdr := map[string]string{
				microvmsapi.ProxyAuthHeader: e.token(t, vmID, time.Hour, onePort(8080)),
				"Content-Type":              "application/grpc",
				"Te":                        "trailers",
			}
			if mode.force {
				hdr[microvmsapi.ProxyForceH2Header] = "true"
			}
			pr, pw := io.Pipe()
			go func() {
				pw.Write([]byte("msg1,"))
				time.Sleep(20 * time.Millisecond)
				pw.Write([]byte("msg2"))
				pw.Close()
			}()
			req := e.request(t, "POST", endpoint, "/grpc", pr, hdr)
			res, body := do(t, client(mode.h2c), req)
			if res.StatusCode != 200 {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			if string(body) != "reply:msg1,msg2" {
				t.Errorf("body %q", body)
			}
			wantProto := "1"
			if mode.force {
				wantProto = "2"
			}
			if p := res.Header.Get("X-Proto"); p != wantProto {
				t.Errorf("upstream spoke HTTP/%s, want %s", p, wantProto)
			}
			if te := res.Header.Get("X-Te"); te != "trailers" {
				t.Errorf("upstream TE %q, want trailers", te)
			}
			if got := res.Trailer.Get("Grpc-Status"); got != "0" {
				t.Errorf("Grpc-Status trailer %q (trailers %v)", got, res.Trailer)
			}
			if got := res.Trailer.Get("Grpc-Message"); got != "ok" {
				t.Errorf("Grpc-Message trailer %q", got)
			}
			if got := res.Trailer.Get("X-Late"); got != "late" {
				t.Errorf("unannounced trailer %q", got)
			}
		})
	}
}

func TestDuplex(t *testing.T) {
	for _, mode := range []struct {
		name       string
		h2c, force bool
	}{{"h2c both", true, true}, {"h1", false, false}} {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, nil)
			hdr := map[string]string{microvmsapi.ProxyAuthHeader: e.token(t, vmID, time.Hour, onePort(8080))}
			if mode.force {
				hdr[microvmsapi.ProxyForceH2Header] = "true"
			}
			pr, pw := io.Pipe()
			defer pw.Close()
			req := e.request(t, "POST", endpoint, "/duplex", pr, hdr)
			res, err := client(mode.h2c).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			br := bufio.NewReader(res.Body)
			// Each reply comes back before the next message is sent: both
			// directions stream.
			for _, m := range []string{"a", "b", "c"} {
				done := make(chan struct{})
				go func() {
					defer close(done)
					io.WriteString(pw, m+"\n")
				}()
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatal(err)
				}
				if line != "echo:"+m+"\n" {
					t.Fatalf("got %q", line)
				}
				<-done
			}
		})
	}
}

// patternReader is a deterministic stream of pseudo-random bytes.
type patternReader struct{ r *rand.ChaCha8 }

func (p patternReader) Read(b []byte) (int, error) { return p.r.Read(b) }

func TestLargeUpload(t *testing.T) {
	const size = 50 << 20
	for _, mode := range []struct {
		name       string
		h2c, force bool
	}{{"h1", false, false}, {"h2c both", true, true}} {
		t.Run(mode.name, func(t *testing.T) {
			e := newEnv(t, nil)
			hdr := map[string]string{microvmsapi.ProxyAuthHeader: e.token(t, vmID, time.Hour, onePort(8080))}
			if mode.force {
				hdr[microvmsapi.ProxyForceH2Header] = "true"
			}
			h := sha256.New()
			src := io.TeeReader(io.LimitReader(patternReader{rand.NewChaCha8([32]byte{7})}, size), h)
			// Hide the length so the body streams (chunked / DATA frames).
			req := e.request(t, "POST", endpoint, "/upload", struct{ io.Reader }{src}, hdr)
			peak, stop := watchHeap()
			res, body := do(t, client(mode.h2c), req)
			stop()
			t.Logf("peak heap in use %d MiB", peak.Load()>>20)
			if peak.Load() > size/2 {
				// Loose on purpose: buffering the upload would need >= size.
				t.Errorf("peak heap in use %d MiB for a %d MiB upload: not streamed?", peak.Load()>>20, size>>20)
			}
			if res.StatusCode != 200 {
				t.Fatalf("status %d: %s", res.StatusCode, body)
			}
			want := fmt.Sprintf("%d %s", size, hex.EncodeToString(h.Sum(nil)))
			if string(body) != want {
				t.Errorf("upstream got %q, want %q", body, want)
			}
		})
	}
}

// watchHeap samples the heap in use until stop is called.
func watchHeap() (peak *atomic.Uint64, stop func()) {
	peak = new(atomic.Uint64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return peak, func() { close(done); wg.Wait() }
}

func TestUpgradePassesThrough(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token(t, vmID, time.Hour, onePort(8080))
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nx-aws-proxy-auth: %s\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n", endpoint, tok)
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", res.StatusCode)
	}
	for _, m := range []string{"one\n", "two\n"} {
		io.WriteString(conn, m)
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line != "ws:"+m {
			t.Errorf("got %q", line)
		}
	}
}

func TestLogging(t *testing.T) {
	e := newEnv(t, nil)
	tok := e.token(t, vmID, time.Hour, onePort(8080))
	secretPath := "/echo?secret-query"
	req := e.request(t, "POST", endpoint, secretPath, strings.NewReader("secret-body"), map[string]string{
		microvmsapi.ProxyAuthHeader: tok,
		"X-Secret-Header":           "secret-value",
	})
	if res, _ := do(t, client(false), req); res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	req = e.request(t, "GET", endpoint, secretPath, nil, map[string]string{microvmsapi.ProxyAuthHeader: "bad-" + tok})
	do(t, client(false), req)
	req = e.request(t, "GET", "down"+suffix, secretPath, nil, map[string]string{
		microvmsapi.ProxyAuthHeader: e.token(t, "microvm-down", time.Hour, onePort(8080)),
	})
	do(t, client(false), req)

	// A request is logged when its handler returns, which can be just
	// after the client has read the whole answer.
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(e.logs.String(), "endpoint request") < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	logs := e.logs.String()
	t.Logf("logs:\n%s", logs)
	for _, secret := range []string{tok, "secret", "/echo", "X-Secret", endpoint} {
		if strings.Contains(logs, secret) {
			t.Errorf("logs contain %q:\n%s", secret, logs)
		}
	}
	for _, want := range []string{"microvm=" + vmID, "port=8080", "status=200", "status=403", "status=502", "duration="} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

func TestParsePort(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want int
		ok   bool
	}{
		{nil, 8080, true},
		{[]string{"1"}, 1, true},
		{[]string{"65535"}, 65535, true},
		{[]string{"3000"}, 3000, true},
		{[]string{"9000"}, 9000, true}, // parsed; refused by ServeHTTP
		{[]string{"08080"}, 8080, true},
		{[]string{""}, 0, false},
		{[]string{"0"}, 0, false},
		{[]string{"00000"}, 0, false},
		{[]string{"65536"}, 0, false},
		{[]string{"080800"}, 0, false},
		{[]string{"-1"}, 0, false},
		{[]string{"+1"}, 0, false},
		{[]string{"80a"}, 0, false},
		{[]string{" 80"}, 0, false},
		{[]string{"8080", "8080"}, 0, false},
	} {
		got, ok := parsePort(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parsePort(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func FuzzPortHeader(f *testing.F) {
	for _, s := range []string{"8080", "1", "65535", "65536", "0", "-1", "80a", "", "09000", "99999999999999999999", "1e3", " 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := parsePort([]string{s})
		// Reference: strconv (which takes no sign with ParseUint), at most
		// five characters, value 1..65535.
		n, err := strconv.ParseUint(s, 10, 64)
		wantOK := err == nil && len(s) <= 5 && n >= 1 && n <= 65535
		want := 0
		if wantOK {
			want = int(n)
		}
		if ok != wantOK || got != want {
			t.Fatalf("parsePort(%q) = %d, %v; want %d, %v", s, got, ok, want, wantOK)
		}
		if ok && (got < 1 || got > 65535) {
			t.Fatalf("out of range: %d", got)
		}
	})
}

// TestAutoResume: a request for a suspended microVM that auto-resumes is
// held until Wake has made it RUNNING, then forwarded; one that does not
// auto-resume, or whose resume fails, is answered 502 without being
// forwarded; a request without a valid token never wakes anything.
func TestAutoResume(t *testing.T) {
	e := newEnv(t, nil)
	sleeping := &target{id: "microvm-sleep", addr: e.up.addr(), autoResume: true, wakeDelay: 200 * time.Millisecond}
	broken := &target{id: "microvm-broken", addr: e.up.addr(), autoResume: true, wakeErr: errors.New("resume failed")}
	e.targets["sleep"+suffix] = sleeping
	e.targets["broken"+suffix] = broken

	tok := func(id string) map[string]string {
		return map[string]string{microvmsapi.ProxyAuthHeader: e.token(t, id, time.Hour, onePort(8080))}
	}
	res, _ := do(t, client(false), e.request(t, "GET", "sleep"+suffix, "/echo", nil, nil))
	if res.StatusCode != 403 || sleeping.wakeCount() != 0 {
		t.Fatalf("no token: %d, %d wakes", res.StatusCode, sleeping.wakeCount())
	}
	start := time.Now()
	res, body := do(t, client(false), e.request(t, "GET", "sleep"+suffix, "/echo", nil, tok("microvm-sleep")))
	if res.StatusCode != 200 || !strings.Contains(string(body), `"method":"GET"`) {
		t.Fatalf("held request: %d %s", res.StatusCode, body)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("answered after %v, before the resume", d)
	}
	if !sleeping.Running() || sleeping.wakeCount() != 1 {
		t.Fatalf("running %v after %d wakes", sleeping.Running(), sleeping.wakeCount())
	}
	hits := e.up.hits.Load()
	res, _ = do(t, client(false), e.request(t, "GET", "broken"+suffix, "/echo", nil, tok("microvm-broken")))
	if res.StatusCode != 502 || e.up.hits.Load() != hits {
		t.Fatalf("failed resume: %d, forwarded %v", res.StatusCode, e.up.hits.Load() != hits)
	}
	if s := broken.meter.Read(); s.InFlight != 0 {
		t.Fatalf("in flight after a 502: %+v", s)
	}
}

// TestActivityMeter: the proxy counts forwarded bytes both ways and the
// requests in flight, streams and upgraded connections included.
func TestActivityMeter(t *testing.T) {
	e := newEnv(t, nil)
	hdr := map[string]string{microvmsapi.ProxyAuthHeader: e.token(t, vmID, time.Hour, onePort(8080))}
	body := strings.Repeat("x", 1000)
	res, got := do(t, client(false), e.request(t, "POST", endpoint, "/upload", strings.NewReader(body), hdr))
	if res.StatusCode != 200 {
		t.Fatalf("upload: %d", res.StatusCode)
	}
	// The request ends for the meter when the proxy's handler returns,
	// which can be just after the client has read the whole answer.
	s := e.vm.meter.Read()
	for deadline := time.Now().Add(5 * time.Second); s.InFlight != 0 && time.Now().Before(deadline); s = e.vm.meter.Read() {
		time.Sleep(5 * time.Millisecond)
	}
	if s.In != 1000 || s.Out != uint64(len(got)) || s.InFlight != 0 || s.LastEnd.IsZero() {
		t.Fatalf("after an upload of 1000 bytes, %d back: %+v", len(got), s)
	}

	// A stream is in flight while it is open.
	res, err := client(false).Do(e.request(t, "GET", endpoint, "/stream", nil, hdr))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(res.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if s := e.vm.meter.Read(); s.InFlight != 1 {
		t.Fatalf("during a stream: %+v", s)
	}
	io.Copy(io.Discard, br)
	res.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for e.vm.meter.Read().InFlight != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("stream still in flight: %+v", e.vm.meter.Read())
		}
		time.Sleep(5 * time.Millisecond)
	}

	// An upgraded connection: in flight until it closes, its bytes counted.
	before := e.vm.meter.Read()
	conn, err := net.Dial("tcp", e.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nx-aws-proxy-auth: %s\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n", endpoint, hdr[microvmsapi.ProxyAuthHeader])
	cr := bufio.NewReader(conn)
	if res, err := http.ReadResponse(cr, nil); err != nil || res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v", err)
	}
	io.WriteString(conn, "hello\n")
	if line, err := cr.ReadString('\n'); err != nil || line != "ws:hello\n" {
		t.Fatalf("ws: %q %v", line, err)
	}
	// The proxy counts a chunk once its write returned, which may be
	// after the client read it: wait for the count.
	for s = e.vm.meter.Read(); s.InFlight != 1 || s.In < before.In+6 || s.Out < before.Out+9; s = e.vm.meter.Read() {
		if time.Now().After(deadline) {
			t.Fatalf("during an upgraded connection: before %+v, now %+v", before, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	conn.Close()
	for e.vm.meter.Read().InFlight != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("upgraded connection still in flight: %+v", e.vm.meter.Read())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closingListener accepts connections and closes each at once, as rayd
// does over its connection cap; it returns its address.
func closingListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// A guest that drops connections while clients are still sending their
// streams' bodies gets each call a 502, and the proxy's server never
// panics (net/http's "invalid concurrent Body.Read call" under full
// duplex, golang/go#68560, which took the platform down).
func TestGuestDropsMidBody(t *testing.T) {
	e := newEnv(t, allowAll{})
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				pr, pw := io.Pipe()
				go func() {
					_, _ = pw.Write(make([]byte, 40))
					time.Sleep(time.Duration(i%3) * time.Millisecond)
					_ = pw.Close()
				}()
				req := e.request(t, http.MethodPost, "full"+suffix, "/rayito.rayd.v1.ProcessService/Start", pr,
					map[string]string{microvmsapi.ProxyAuthHeader: "x", "Content-Type": "application/connect+proto"})
				res, err := c.Do(req)
				if err != nil {
					bad.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusBadGateway {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if strings.Contains(e.logs.String(), "panic") {
		line, _, _ := strings.Cut(e.logs.String()[strings.Index(e.logs.String(), "panic"):], "\n")
		t.Fatalf("the proxy's server panicked: %s", line)
	}
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d of 900 calls did not get a 502", n)
	}
}
