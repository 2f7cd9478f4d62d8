package local

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/dashboard/internal/session"
	"github.com/rayito-dev/rayito/dashboard/internal/theme"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// fakeBackend stands in for the platform in these HTTP-rule tests and
// counts every call: a refused request must make none. (The page against
// a real local platform is tests/dashboard_test.go.)
type fakeBackend struct {
	calls   atomic.Int64
	mu      sync.Mutex
	acted   []string
	items   []Sandbox
	failErr error // under mu
}

func (f *fakeBackend) listFn() ([]Sandbox, error) {
	f.calls.Add(1)
	return f.items, f.err()
}

func (f *fakeBackend) record(s string) error {
	f.calls.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acted = append(f.acted, s)
	return f.failErr
}

func (f *fakeBackend) err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failErr
}

func (f *fakeBackend) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failErr = err
}

type fb = fakeBackend

func (f *fb) list(context.Context) ([]Sandbox, error) { return f.listFn() }
func (f *fb) logs(_ context.Context, id string) ([]string, bool, error) {
	f.calls.Add(1)
	return []string{"line 1 of " + id, "<b>bold</b>"}, false, f.err()
}
func (f *fb) events(_ context.Context, id string) ([]Event, error) {
	f.calls.Add(1)
	return []Event{{SandboxID: id, Type: "created", Generation: 1}}, f.err()
}
func (f *fb) kill(_ context.Context, id string) error   { return f.record("kill " + id) }
func (f *fb) pause(_ context.Context, id string) error  { return f.record("pause " + id) }
func (f *fb) resume(_ context.Context, id string) error { return f.record("resume " + id) }
func (f *fb) setTimeout(_ context.Context, id string, d time.Duration) error {
	return f.record(fmt.Sprintf("timeout %s %s", id, d))
}

type harness struct {
	t    *testing.T
	srv  *Server
	be   *fakeBackend
	addr string // 127.0.0.1:port
}

func start(t *testing.T, opts Options) *harness { return startWith(t, opts, nil) }

// startWith lets configure change the server before it serves.
func startWith(t *testing.T, opts Options, configure func(*Server)) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.MaxIDs == 0 {
		opts.MaxIDs = DefaultMaxIDs
	}
	if opts.ActionInterval == 0 {
		opts.ActionInterval = time.Millisecond
	}
	if opts.Backend == "" {
		opts.Backend = "local"
	}
	started := time.Now().Add(-90 * time.Second)
	be := &fakeBackend{items: []Sandbox{{ID: "sbx-1", State: "RUNNING", Template: "local", StartedAt: &started, AgeSecs: 90, Metadata: map[string]string{"k": "<script>x</script>"}, MemBytes: 1 << 30}}}
	var logo []byte
	th := theme.Default()
	if opts.LogoFile != "" || opts.ThemeFile != "" {
		th, logo, err = LoadTheme(opts.ThemeFile, opts.LogoFile)
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := newServer(opts, ln, th, logo, be)
	if err != nil {
		t.Fatal(err)
	}
	if configure != nil {
		configure(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return &harness{t: t, srv: s, be: be, addr: ln.Addr().String()}
}

// client never follows redirects and keeps no cookies of its own.
var client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }, Timeout: 10 * time.Second}

func (h *harness) do(method, path string, hdr map[string]string, body string) (*http.Response, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, "http://"+h.addr+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	checkHeaders(h.t, method+" "+path, resp)
	return resp, string(data)
}

// login spends the startup token and returns the cookie header.
func (h *harness) login() string {
	h.t.Helper()
	resp, _ := h.do("GET", "/?token="+h.srv.session.StartupToken(), nil, "")
	if resp.StatusCode != http.StatusSeeOther {
		h.t.Fatalf("login: %d", resp.StatusCode)
	}
	c := resp.Cookies()
	if len(c) != 1 {
		h.t.Fatalf("login: %d cookies", len(c))
	}
	return c[0].Name + "=" + c[0].Value
}

func (h *harness) csrf(cookie string) string {
	h.t.Helper()
	resp, body := h.do("GET", "/api/v1/session", map[string]string{"Cookie": cookie}, "")
	if resp.StatusCode != 200 {
		h.t.Fatalf("session: %d %s", resp.StatusCode, body)
	}
	var s struct{ CSRF string }
	if err := json.Unmarshal([]byte(body), &s); err != nil || len(s.CSRF) < 40 {
		h.t.Fatalf("session: %s", body)
	}
	return s.CSRF
}

var wantHeaders = map[string]string{
	"Content-Security-Policy":      CSP,
	"X-Content-Type-Options":       "nosniff",
	"Cache-Control":                "no-store",
	"X-Frame-Options":              "DENY",
	"Cross-Origin-Resource-Policy": "same-origin",
	"Referrer-Policy":              "no-referrer",
}

func checkHeaders(t *testing.T, what string, resp *http.Response) {
	t.Helper()
	for k, v := range wantHeaders {
		got := resp.Header.Values(k)
		if k == "Content-Security-Policy" && resp.Request != nil && resp.Request.URL.Path == "/logo.svg" && resp.StatusCode == 200 {
			v = LogoCSP
		}
		if len(got) != 1 || got[0] != v {
			t.Errorf("%s (%d): %s = %q, want %q", what, resp.StatusCode, k, got, v)
		}
	}
}

func wantError(t *testing.T, what string, resp *http.Response, body string, status int, code string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("%s: status %d, want %d (%s)", what, resp.StatusCode, status, body)
	}
	if code == "" {
		return
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != code || e.Error.Message != messages[code] {
		t.Fatalf("%s: body %q, want code %q with its fixed message", what, body, code)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: content type %q", what, ct)
	}
}

func TestNothingWithoutTheCookie(t *testing.T) {
	h := start(t, Options{AllowActions: true})
	for _, p := range []string{"/", "/index.html", "/app.js", "/style.css", "/theme.css", "/logo.svg", "/nope"} {
		resp, body := h.do("GET", p, nil, "")
		if resp.StatusCode != 401 || strings.Contains(body, "<") || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("GET %s without a cookie: %d %q", p, resp.StatusCode, body)
		}
	}
	for _, p := range []string{"/api/v1/session", "/api/v1/sandboxes", "/api/v1/sandboxes/sbx-1/logs", "/api/v1/events", "/api/v1/cost", "/api/v1/nope"} {
		resp, body := h.do("GET", p, nil, "")
		wantError(t, "GET "+p, resp, body, 401, "unauthenticated")
	}
	resp, body := h.do("POST", "/api/v1/actions", map[string]string{"Content-Type": "application/json"}, `{"action":"kill","ids":["sbx-1"],"confirm":true}`)
	wantError(t, "POST without a cookie", resp, body, 401, "unauthenticated")
	// A forged cookie, and two cookies, are nothing either.
	resp, body = h.do("GET", "/api/v1/sandboxes", map[string]string{"Cookie": h.srv.CookieName() + "=" + strings.Repeat("A", 43)}, "")
	wantError(t, "forged cookie", resp, body, 401, "unauthenticated")
	good := h.login()
	resp, body = h.do("GET", "/api/v1/sandboxes", map[string]string{"Cookie": good + "; " + good}, "")
	wantError(t, "two cookies", resp, body, 401, "unauthenticated")
	if n := h.be.calls.Load(); n != 0 {
		t.Fatalf("%d platform calls without a session", n)
	}
	// With it: the page, its files, the API.
	for _, p := range []string{"/", "/app.js", "/style.css", "/theme.css"} {
		if resp, _ := h.do("GET", p, map[string]string{"Cookie": good}, ""); resp.StatusCode != 200 {
			t.Errorf("GET %s with the cookie: %d", p, resp.StatusCode)
		}
	}
}

func TestStartupToken(t *testing.T) {
	h := start(t, Options{})
	// A wrong token spends nothing.
	resp, _ := h.do("GET", "/?token=wrong", nil, "")
	if resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %d", resp.StatusCode)
	}
	resp, _ = h.do("GET", "/?token="+h.srv.session.StartupToken(), nil, "")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("exchange: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if rp := resp.Header.Get("Referrer-Policy"); rp != "no-referrer" {
		t.Fatalf("exchange: Referrer-Policy %q", rp)
	}
	set := resp.Header.Values("Set-Cookie")
	if len(set) != 1 {
		t.Fatalf("Set-Cookie: %q", set)
	}
	port := strings.Split(h.addr, ":")[1]
	c := set[0]
	for _, want := range []string{"rayito_dashboard_" + port + "=", "Path=/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(c, want) {
			t.Errorf("Set-Cookie %q lacks %q", c, want)
		}
	}
	for _, bad := range []string{"Domain", "Max-Age", "Expires"} {
		if strings.Contains(c, bad) {
			t.Errorf("Set-Cookie %q has %s (a session cookie only)", c, bad)
		}
	}
	v := resp.Cookies()[0].Value
	if len(v) != 43 { // 32 bytes, base64url
		t.Errorf("cookie value of %d characters", len(v))
	}
	// Single use.
	resp, body := h.do("GET", "/?token="+h.srv.session.StartupToken(), nil, "")
	if resp.StatusCode != 401 || len(resp.Cookies()) != 0 || !strings.Contains(body, "already used") {
		t.Fatalf("second use: %d %q", resp.StatusCode, body)
	}
}

func TestStartupTokenExpires(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := startWith(t, Options{}, func(s *Server) { s.session = session.New(s.port, 0, clock) })
	tok := h.srv.session.StartupToken()
	mu.Lock()
	now = now.Add(5*time.Minute + time.Second)
	mu.Unlock()
	resp, body := h.do("GET", "/?token="+tok, nil, "")
	if resp.StatusCode != 401 || len(resp.Cookies()) != 0 || !strings.Contains(body, "expired") {
		t.Fatalf("expired token: %d %q", resp.StatusCode, body)
	}
}

func TestHostAndOrigin(t *testing.T) {
	h := start(t, Options{AllowActions: true})
	cookie := h.login()
	port := strings.Split(h.addr, ":")[1]
	for _, host := range []string{"evil.example:" + port, "127.0.0.1", "127.0.0.1:1", "localhost.:" + port, "127.0.0.1.nip.io:" + port} {
		resp, body := h.do("GET", "/api/v1/sandboxes", map[string]string{"Cookie": cookie, "Host": host}, "")
		wantError(t, "Host "+host, resp, body, 421, "misdirected_request")
		resp, body = h.do("GET", "/?token="+h.srv.session.StartupToken(), map[string]string{"Host": host}, "")
		if resp.StatusCode != 421 || len(resp.Cookies()) != 0 {
			t.Fatalf("startup URL with Host %s: %d %s", host, resp.StatusCode, body)
		}
	}
	for _, host := range []string{"localhost:" + port, "[::1]:" + port, "127.0.0.1:" + port} {
		if resp, _ := h.do("GET", "/api/v1/sandboxes", map[string]string{"Cookie": cookie, "Host": host}, ""); resp.StatusCode != 200 {
			t.Errorf("Host %s: %d", host, resp.StatusCode)
		}
	}
	for _, origin := range []string{"null", "http://evil.example", "http://127.0.0.1:1", "https://127.0.0.1:" + port} {
		resp, body := h.do("GET", "/api/v1/sandboxes", map[string]string{"Cookie": cookie, "Origin": origin}, "")
		wantError(t, "Origin "+origin, resp, body, 403, "forbidden_origin")
		resp, body = h.do("POST", "/api/v1/actions", map[string]string{"Cookie": cookie, "Origin": origin, "Content-Type": "application/json", CSRFHeader: h.csrf(cookie)}, `{"action":"kill","ids":["sbx-1"],"confirm":true}`)
		wantError(t, "POST Origin "+origin, resp, body, 403, "forbidden_origin")
	}
	if resp, _ := h.do("GET", "/api/v1/sandboxes", map[string]string{"Cookie": cookie, "Origin": "http://127.0.0.1:" + port}, ""); resp.StatusCode != 200 {
		t.Errorf("own origin: %d", resp.StatusCode)
	}
	h.be.mu.Lock()
	defer h.be.mu.Unlock()
	if len(h.be.acted) != 0 {
		t.Fatalf("acted: %q", h.be.acted)
	}
}

func TestSecFetchSite(t *testing.T) {
	h := start(t, Options{})
	cookie := h.login()
	for _, v := range []string{"cross-site", "same-site", "other"} {
		resp, body := h.do("GET", "/api/v1/sandboxes", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": v}, "")
		wantError(t, "Sec-Fetch-Site "+v, resp, body, 403, "cross_site")
	}
	calls := h.be.calls.Load()
	for _, v := range []string{"same-origin", "none"} {
		if resp, _ := h.do("GET", "/api/v1/sandboxes", map[string]string{"Cookie": cookie, "Sec-Fetch-Site": v}, ""); resp.StatusCode != 200 {
			t.Errorf("Sec-Fetch-Site %s: %d", v, resp.StatusCode)
		}
	}
	if calls != 0 {
		t.Fatalf("%d platform calls for cross-site requests", calls)
	}
}

func TestPostNeedsJSONAndCSRF(t *testing.T) {
	h := start(t, Options{AllowActions: true})
	cookie := h.login()
	csrf := h.csrf(cookie)
	body := `{"action":"kill","ids":["sbx-1"],"confirm":true}`
	for name, hdr := range map[string]map[string]string{
		"no content type": {"Cookie": cookie, CSRFHeader: csrf},
		"text/plain":      {"Cookie": cookie, CSRFHeader: csrf, "Content-Type": "text/plain"},
		"form":            {"Cookie": cookie, CSRFHeader: csrf, "Content-Type": "application/x-www-form-urlencoded"},
		"json-ish":        {"Cookie": cookie, CSRFHeader: csrf, "Content-Type": "application/jsonp"},
		"no csrf":         {"Cookie": cookie, "Content-Type": "application/json"},
		"wrong csrf":      {"Cookie": cookie, "Content-Type": "application/json", CSRFHeader: csrf[:len(csrf)-1] + "x"},
		"cookie as csrf":  {"Cookie": cookie, "Content-Type": "application/json", CSRFHeader: strings.SplitN(cookie, "=", 2)[1]},
		"startup as csrf": {"Cookie": cookie, "Content-Type": "application/json", CSRFHeader: h.srv.session.StartupToken()},
		"empty csrf":      {"Cookie": cookie, "Content-Type": "application/json", CSRFHeader: ""},
	} {
		resp, b := h.do("POST", "/api/v1/actions", hdr, body)
		wantError(t, name, resp, b, 403, "csrf")
	}
	resp, b := h.do("POST", "/api/v1/actions", map[string]string{"Cookie": cookie, "Content-Type": "application/json; charset=utf-8", CSRFHeader: csrf}, body)
	if resp.StatusCode != 200 {
		t.Fatalf("a good POST: %d %s", resp.StatusCode, b)
	}
	h.be.mu.Lock()
	acted := h.be.acted
	h.be.mu.Unlock()
	if len(acted) != 1 || acted[0] != "kill sbx-1" {
		t.Fatalf("acted: %q", acted)
	}
	// Other methods.
	resp, b = h.do("DELETE", "/api/v1/sandboxes", map[string]string{"Cookie": cookie}, "")
	wantError(t, "DELETE", resp, b, 405, "method_not_allowed")
}

func TestActions(t *testing.T) {
	ro := start(t, Options{})
	cookie := ro.login()
	hdr := map[string]string{"Cookie": cookie, "Content-Type": "application/json", CSRFHeader: ro.csrf(cookie)}
	for _, a := range []string{"kill", "pause", "resume", "set_timeout"} {
		resp, b := ro.do("POST", "/api/v1/actions", hdr, `{"action":"`+a+`","ids":["sbx-1"],"confirm":true,"timeout_seconds":60}`)
		wantError(t, "read-only "+a, resp, b, 403, "read_only")
	}
	if n := ro.be.calls.Load(); n != 0 {
		t.Fatalf("read-only: %d platform calls", n)
	}

	h := start(t, Options{AllowActions: true, MaxIDs: 3})
	cookie = h.login()
	hdr = map[string]string{"Cookie": cookie, "Content-Type": "application/json", CSRFHeader: h.csrf(cookie)}
	for name, c := range map[string]struct {
		body, code string
	}{
		"no confirm":     {`{"action":"kill","ids":["sbx-1"]}`, "confirm_required"},
		"confirm false":  {`{"action":"kill","ids":["sbx-1"],"confirm":false}`, "confirm_required"},
		"confirm string": {`{"action":"kill","ids":["sbx-1"],"confirm":"true"}`, "invalid_request"},
		"unknown action": {`{"action":"delete","ids":["sbx-1"],"confirm":true}`, "unknown_action"},
		"unknown field":  {`{"action":"kill","ids":["sbx-1"],"confirm":true,"force":true}`, "invalid_request"},
		"bad id":         {`{"action":"kill","ids":["../etc"],"confirm":true}`, "invalid_id"},
		"empty id":       {`{"action":"kill","ids":[""],"confirm":true}`, "invalid_id"},
		"no ids":         {`{"action":"kill","ids":[],"confirm":true}`, "invalid_id"},
		"duplicate id":   {`{"action":"kill","ids":["a","a"],"confirm":true}`, "invalid_id"},
		"too many":       {`{"action":"kill","ids":["a","b","c","d"],"confirm":true}`, "too_many_ids"},
		"timeout 0":      {`{"action":"set_timeout","ids":["a"],"confirm":true}`, "invalid_timeout"},
		"timeout 9h":     {`{"action":"set_timeout","ids":["a"],"confirm":true,"timeout_seconds":32400}`, "invalid_timeout"},
		"two objects":    {`{"action":"kill","ids":["a"],"confirm":true}{}`, "invalid_request"},
		"not json":       {`kill a`, "invalid_request"},
	} {
		resp, b := h.do("POST", "/api/v1/actions", hdr, c.body)
		wantError(t, name, resp, b, 400, c.code)
	}
	if n := h.be.calls.Load(); n != 0 {
		t.Fatalf("refused actions: %d platform calls", n)
	}
	resp, b := h.do("POST", "/api/v1/actions", hdr, `{"action":"set_timeout","ids":["a","b"],"confirm":true,"timeout_seconds":600}`)
	if resp.StatusCode != 200 || !strings.Contains(b, `"results":[{"id":"a","ok":true},{"id":"b","ok":true}]`) {
		t.Fatalf("set_timeout: %d %s", resp.StatusCode, b)
	}
	// A platform failure is a code, never the platform's text.
	h.be.fail(fmt.Errorf("%w: AccessDeniedException: User arn:aws:iam::123456789012:user/x is not authorized", rayito.ErrPermissionDenied))
	resp, b = h.do("POST", "/api/v1/actions", hdr, `{"action":"kill","ids":["a"],"confirm":true}`)
	if resp.StatusCode != 200 || !strings.Contains(b, `"error":"permission_denied"`) || strings.Contains(b, "arn:") || strings.Contains(b, "Access") {
		t.Fatalf("failed kill: %s", b)
	}
	h.be.fail(fmt.Errorf("set timeout: %w", rayito.ErrLifecycleUnmanaged))
	resp, b = h.do("POST", "/api/v1/actions", hdr, `{"action":"set_timeout","ids":["a"],"confirm":true,"timeout_seconds":60}`)
	if resp.StatusCode != 200 || !strings.Contains(b, `"error":"no_deadline"`) {
		t.Fatalf("set_timeout without a deadline: %s", b)
	}
	h.be.fail(fmt.Errorf("%w: AccessDeniedException: User arn:aws:iam::123456789012:user/x is not authorized", rayito.ErrPermissionDenied))
	resp, b = h.do("GET", "/api/v1/sandboxes", map[string]string{"Cookie": cookie}, "")
	wantError(t, "failed list", resp, b, 403, "permission_denied")
	if strings.Contains(b, "arn:") {
		t.Fatal(b)
	}
}

// The worker paces calls: N ids take at least (N-1) intervals.
func TestActionsPaced(t *testing.T) {
	h := start(t, Options{AllowActions: true, ActionInterval: 100 * time.Millisecond})
	cookie := h.login()
	hdr := map[string]string{"Cookie": cookie, "Content-Type": "application/json", CSRFHeader: h.csrf(cookie)}
	t0 := time.Now()
	resp, b := h.do("POST", "/api/v1/actions", hdr, `{"action":"pause","ids":["a","b","c","d"],"confirm":true}`)
	if resp.StatusCode != 200 {
		t.Fatal(b)
	}
	if d := time.Since(t0); d < 300*time.Millisecond {
		t.Fatalf("4 calls in %v: not paced", d)
	}
}

func TestBodyCap(t *testing.T) {
	h := start(t, Options{AllowActions: true})
	cookie := h.login()
	big := `{"action":"kill","ids":["a"],"confirm":true,"x":"` + strings.Repeat("a", 65<<10) + `"}`
	// Before anything else: no cookie, a foreign Host, still 413.
	resp, b := h.do("POST", "/api/v1/actions", map[string]string{"Host": "evil.example"}, big)
	wantError(t, "65 KiB, foreign host", resp, b, 413, "payload_too_large")
	resp, b = h.do("POST", "/api/v1/actions", map[string]string{"Cookie": cookie, "Content-Type": "application/json"}, big)
	wantError(t, "65 KiB", resp, b, 413, "payload_too_large")
	// Chunked (no Content-Length), raw on the socket.
	status := raw(t, h.addr, "POST /api/v1/actions HTTP/1.1\r\nHost: "+h.addr+"\r\nCookie: "+cookie+"\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"+fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(big), big))
	if status != 413 {
		t.Fatalf("chunked 65 KiB: %d", status)
	}
	if n := h.be.calls.Load(); n != 0 {
		t.Fatalf("%d calls", n)
	}
}

// raw sends req on a fresh connection and returns the answer's status.
func raw(t *testing.T, addr, req string) int {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() { _, _ = io.WriteString(c, req) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	checkHeaders(t, "raw", resp)
	return resp.StatusCode
}

func TestRawHost(t *testing.T) {
	h := start(t, Options{})
	cookie := h.login()
	if s := raw(t, h.addr, "GET /api/v1/session HTTP/1.1\r\nHost: attacker.example\r\nCookie: "+cookie+"\r\n\r\n"); s != 421 {
		t.Fatalf("rebinding Host: %d", s)
	}
	if s := raw(t, h.addr, "GET /api/v1/session HTTP/1.1\r\nHost: "+h.addr+"\r\nOrigin: null\r\nCookie: "+cookie+"\r\n\r\n"); s != 403 {
		t.Fatalf("Origin null: %d", s)
	}
	if s := raw(t, h.addr, "GET /api/v1/session HTTP/1.1\r\nHost: "+h.addr+"\r\nOrigin: http://"+h.addr+"\r\nOrigin: http://evil.example\r\nCookie: "+cookie+"\r\n\r\n"); s != 403 {
		t.Fatalf("two Origins: %d", s)
	}
}

// Every answer, 404s, 405s and errors included, carries the headers;
// do and raw check them on each.
func TestHeadersEverywhere(t *testing.T) {
	h := start(t, Options{})
	cookie := h.login()
	for _, p := range []string{"/", "/app.js", "/style.css", "/theme.css", "/nope", "/api/v1/nope", "/api/v1/sandboxes", "/api/v1/events", "/api/v1/cost", "/api/v1/sandboxes/x/logs", "/api/v1/sandboxes/..%2f/logs", "/logo.svg"} {
		h.do("GET", p, map[string]string{"Cookie": cookie}, "")
		h.do("PUT", p, map[string]string{"Cookie": cookie}, "")
	}
	h.do("GET", "/?token=x", nil, "")
}

func TestNoSecretsInAnswers(t *testing.T) {
	h := start(t, Options{AllowActions: true})
	cookie := h.login()
	for _, p := range []string{"/api/v1/session", "/api/v1/sandboxes", "/api/v1/events?sandbox=sbx-1", "/api/v1/cost", "/api/v1/sandboxes/sbx-1/logs"} {
		resp, b := h.do("GET", p, map[string]string{"Cookie": cookie}, "")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, b)
		}
		lower := strings.ToLower(b)
		for _, bad := range []string{"token", "envs", "payload", "endpoint", "jwe", "secret", "password", strings.SplitN(cookie, "=", 2)[1], h.srv.session.StartupToken()} {
			if strings.Contains(lower, strings.ToLower(bad)) {
				t.Errorf("%s has %q: %s", p, bad, b)
			}
		}
	}
	// The Sandbox type has no field for them at all.
	data, _ := json.Marshal(Sandbox{})
	for _, bad := range []string{"token", "env", "payload", "endpoint"} {
		if strings.Contains(string(data), bad) {
			t.Errorf("Sandbox has %q", bad)
		}
	}
}

func TestAccountAndCost(t *testing.T) {
	h := start(t, Options{})
	cookie := h.login()
	for _, q := range []string{"?account=prod", "?account=default&account=prod", "?account=%3Cx%3E"} {
		resp, b := h.do("GET", "/api/v1/sandboxes"+q, map[string]string{"Cookie": cookie}, "")
		wantError(t, "account "+q, resp, b, 400, "unknown_account")
	}
	if n := h.be.calls.Load(); n != 0 {
		t.Fatalf("unknown account: %d calls", n)
	}
	if _, err := New(Options{Accounts: []Account{{Label: "prod", RoleARN: "arn:aws:iam::123456789012:role/r"}}}); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "RAYITO_BACKEND=aws") {
		t.Fatalf("--account on the local platform: %v", err)
	}
	// The estimate: 1 GiB for 90 s.
	resp, b := h.do("GET", "/api/v1/cost", map[string]string{"Cookie": cookie}, "")
	var c struct {
		Estimate bool
		Total    float64 `json:"total_usd"`
		Basis    string
	}
	if resp.StatusCode != 200 || json.Unmarshal([]byte(b), &c) != nil || !c.Estimate || c.Total < 90*PricePerGiBSecond*0.99 || c.Total > 91*PricePerGiBSecond || !strings.Contains(c.Basis, "not your bill") {
		t.Fatalf("cost: %d %s", resp.StatusCode, b)
	}
	// Billed cost: the CSRF token first, then --cost-explorer.
	resp, b = h.do("GET", "/api/v1/cost?billed=true", map[string]string{"Cookie": cookie}, "")
	wantError(t, "billed without csrf", resp, b, 403, "csrf")
	csrf := h.csrf(cookie)
	resp, b = h.do("GET", "/api/v1/cost?billed=true", map[string]string{"Cookie": cookie, CSRFHeader: csrf}, "")
	wantError(t, "billed without --cost-explorer", resp, b, 403, "cost_explorer_off")
	if n := h.be.calls.Load(); n != 1 { // the estimate's listing
		t.Fatalf("billed: %d calls", n)
	}
	// --cost-explorer is AWS only (TestBilled goes on to the wire).
	if _, err := New(Options{CostExplorer: true}); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "RAYITO_BACKEND=aws") {
		t.Fatalf("--cost-explorer on the local platform: %v", err)
	}
}

func TestThemeAndLogo(t *testing.T) {
	dir := t.TempDir()
	th := filepath.Join(dir, "theme.json")
	logo := filepath.Join(dir, "logo.svg")
	os.WriteFile(th, []byte(`{"title":"Acme <b>","font":"Inter, sans-serif","colors":{"accent":"#FF0000"}}`), 0o600)
	os.WriteFile(logo, []byte(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10"><rect width="10" height="10" fill="#f00"/></svg>`), 0o600)
	h := start(t, Options{ThemeFile: th, LogoFile: logo})
	cookie := h.login()
	resp, b := h.do("GET", "/theme.css", map[string]string{"Cookie": cookie}, "")
	if resp.StatusCode != 200 || !strings.Contains(b, "--accent: #ff0000;") || !strings.Contains(b, `--font: "Inter", sans-serif;`) || resp.Header.Get("Content-Type") != "text/css; charset=utf-8" {
		t.Fatalf("theme.css: %s", b)
	}
	resp, b = h.do("GET", "/logo.svg", map[string]string{"Cookie": cookie}, "")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") != LogoCSP || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("logo: %d %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
	_, b = h.do("GET", "/api/v1/session", map[string]string{"Cookie": cookie}, "")
	if !strings.Contains(b, `"title":"Acme \u003cb\u003e"`) || !strings.Contains(b, `"logo":true`) {
		t.Fatalf("session: %s", b)
	}
	// Bad ones are refused by New, before listening.
	os.WriteFile(th, []byte(`{"title":"x","colour":"#000000"}`), 0o600)
	if _, err := New(Options{ThemeFile: th}); err == nil || !strings.Contains(err.Error(), "theme") {
		t.Fatalf("bad theme: %v", err)
	}
	os.WriteFile(logo, []byte(`<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`), 0o600)
	if _, err := New(Options{LogoFile: logo}); err == nil {
		t.Fatal("a logo with a script was accepted")
	}
}

func TestServeURL(t *testing.T) {
	s, err := New(Options{SDK: []rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint("http://127.0.0.1:1")}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(s.URL())
	if err != nil || u.Host != fmt.Sprintf("127.0.0.1:%d", s.Port()) || len(u.Query().Get("token")) != 43 {
		t.Fatalf("URL %q", s.URL())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	resp, err := client.Get(s.URL())
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("%v %v", resp, err)
	}
	resp.Body.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A listing is reused for ListTTL (page refreshes and the cost estimate
// share it) and dropped after an action.
func TestListCached(t *testing.T) {
	h := start(t, Options{AllowActions: true, ListTTL: time.Hour})
	cookie := h.login()
	for _, p := range []string{"/api/v1/sandboxes", "/api/v1/cost", "/api/v1/sandboxes"} {
		if resp, b := h.do("GET", p, map[string]string{"Cookie": cookie}, ""); resp.StatusCode != 200 {
			t.Fatalf("%s: %s", p, b)
		}
	}
	if n := h.be.calls.Load(); n != 1 {
		t.Fatalf("%d listings, want 1", n)
	}
	h.do("POST", "/api/v1/actions", map[string]string{"Cookie": cookie, "Content-Type": "application/json", CSRFHeader: h.csrf(cookie)}, `{"action":"pause","ids":["a"],"confirm":true}`)
	h.do("GET", "/api/v1/sandboxes", map[string]string{"Cookie": cookie}, "")
	if n := h.be.calls.Load(); n != 3 { // list, pause, list
		t.Fatalf("%d calls, want 3", n)
	}
}

// serveForTest serves an already built Server (New) for the test.
func serveForTest(t *testing.T, s *Server) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return &harness{t: t, srv: s, be: &fakeBackend{}, addr: s.ln.Addr().String()}
}
