package gateway

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"
)

func setRoute(t *testing.T, e *env, r ...Route) {
	t.Helper()
	if err := e.g.SetRoutes(r); err != nil {
		t.Fatal(err)
	}
}

func TestRoutePathVectorsNoDial(t *testing.T) {
	e := newEnv(t, nil)
	setRoute(t, e, basicRoute(e, "api"))
	port := e.route("api").Port
	if port == 0 {
		t.Fatal("no port")
	}
	for _, p := range refusedPaths {
		if p == "" || strings.ContainsAny(p, " #?") {
			continue // not expressible as one request-target path
		}
		resp, body := rawDo(t, port, "GET", p)
		if resp.StatusCode == http.StatusBadRequest && resp.Header.Get("Content-Type") != "application/json" {
			// net/http itself refused the request line (e.g. "a/b",
			// "%zz"); still nothing may have been dialed.
			t.Logf("net/http refused %q itself", p)
			continue
		}
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%q: status %d", p, resp.StatusCode)
			continue
		}
		wantRefusal(t, resp, body, http.StatusForbidden, ClassNotAllowed)
	}
	// absolute-form and authority-form
	for _, target := range []string{"http://example.com/v1/messages", "https://example.com/", "*"} {
		resp, body := rawDo(t, port, "GET", target)
		wantRefusal(t, resp, body, http.StatusForbidden, ClassNotAllowed)
	}
	resp, body := rawDo(t, port, "CONNECT", "example.com:443")
	if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("CONNECT: %d %q", resp.StatusCode, body)
	}
	if n := e.dials.Load(); n != 0 {
		t.Fatalf("%d dials for refused paths", n)
	}
	if e.up.hits.Load() != 0 {
		t.Fatal("upstream reached")
	}
	if st := e.route("api"); st.Refused == 0 || st.LastErrorClass != ClassNotAllowed {
		t.Fatalf("status %+v", st)
	}
	// Safe paths reach the allow check and are forwarded byte for byte.
	for _, p := range allowedPaths {
		for _, q := range []string{"", "?a=1;b=2&c=%2f&&d"} {
			resp, body := rawDo(t, port, "GET", p+q)
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("%q: %d %q", p+q, resp.StatusCode, body)
			}
			if got := e.up.last(t).RequestURI; got != p+q {
				t.Fatalf("upstream got %q, want %q", got, p+q)
			}
		}
	}
}

func TestRouteRules(t *testing.T) {
	e := newEnv(t, nil)
	r := basicRoute(e, "api")
	r.Rules = []Rule{{Method: "POST", Path: "/v1/messages"}, {Method: "GET", Path: "/v1/models/*"}, {Method: "*", Path: "/a%20b"}}
	setRoute(t, e, r)
	port := e.route("api").Port
	cases := []struct {
		method, path string
		ok           bool
	}{
		{"POST", "/v1/messages", true},
		{"GET", "/v1/messages", false},
		{"POST", "/v1/messages/", false},
		{"POST", "/v1/messagesx", false},
		{"GET", "/v1/models/", true},
		{"GET", "/v1/models/x/y", true},
		{"GET", "/v1/models", false},
		{"GET", "/v1/%6dodels/x", true}, // decoded once, then matched
		{"DELETE", "/a%20b", true},
		{"GET", "/other", false},
	}
	for _, c := range cases {
		resp, body := rawDo(t, port, c.method, c.path, "Content-Length: 0")
		if c.ok {
			if resp.StatusCode != 200 {
				t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, body)
			}
			continue
		}
		wantRefusal(t, resp, body, http.StatusForbidden, ClassNotAllowed)
	}
}

func TestRouteHeaders(t *testing.T) {
	e := newEnv(t, nil)
	setRoute(t, e, basicRoute(e, "api"))
	e.up.setExtra(func(w http.ResponseWriter, r *http.Request) bool {
		h := w.Header()
		h.Set("X-Api-Key", "echo")               // by name
		h.Set("Authorization", "echo")           // by name
		h.Set("X-Echo", "value "+canary+" here") // by value
		h.Add("X-Multi", "fine")
		h.Add("X-Multi", canary) // by value, second value
		h.Set("X-Safe", "kept")
		h.Set("Connection", "x-hop")
		h.Set("X-Hop", "hop")
		w.Header().Set("Trailer", "X-Trail")
		io.WriteString(w, "body")
		h.Set("X-Trail", canary)
		return true
	})
	port := e.route("api").Port
	resp, body := rawDo(t, port, "GET", "/v1/x?q=1",
		"X-API-KEY: forged", "x-api-key: forged2", "authorization: Bearer forged",
		"X-Forwarded-For: 1.2.3.4", "Forwarded: for=1.2.3.4", "Proxy-Authorization: Basic eA==",
		"Connection: X-Custom-Hop", "X-Custom-Hop: 1", "X-Keep: yes", "Upgrade: websocket")
	if resp.StatusCode != 200 || body != "body" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	got := e.up.last(t)
	if v := got.Header.Values("X-Api-Key"); len(v) != 1 || v[0] != canary {
		t.Fatalf("x-api-key %q", v)
	}
	if v := got.Header.Values("Authorization"); len(v) != 1 || v[0] != "Bearer "+canary+"-bearer" {
		t.Fatalf("authorization %q", v)
	}
	if got.Host != upstreamDNS+":"+strconv.Itoa(int(e.up.port)) {
		t.Fatalf("Host %q", got.Host)
	}
	for _, h := range []string{"X-Forwarded-For", "Forwarded", "X-Forwarded-Host", "X-Forwarded-Proto", "Proxy-Authorization", "X-Custom-Hop", "Upgrade"} {
		if got.Header.Get(h) != "" {
			t.Errorf("upstream got %s", h)
		}
	}
	if got.Header.Get("X-Keep") != "yes" {
		t.Error("X-Keep dropped")
	}
	for _, h := range []string{"X-Api-Key", "Authorization", "X-Echo", "X-Multi", "X-Hop", "X-Trail"} {
		if resp.Header.Get(h) != "" || resp.Trailer.Get(h) != "" {
			t.Errorf("response carries %s", h)
		}
	}
	if resp.Header.Get("X-Safe") != "kept" {
		t.Error("X-Safe dropped")
	}
}

func TestRouteRateLimit(t *testing.T) {
	e := newEnv(t, nil)
	r := basicRoute(e, "api")
	r.RatePerMinute = 2
	setRoute(t, e, r)
	port := e.route("api").Port
	for i := 0; i < 2; i++ {
		if resp, _ := rawDo(t, port, "GET", "/x"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	resp, body := rawDo(t, port, "GET", "/x")
	wantRefusal(t, resp, body, http.StatusTooManyRequests, ClassRateLimited)
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); ra < 1 || ra > 30 {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	e.advance(30 * time.Second)
	if resp, _ := rawDo(t, port, "GET", "/x"); resp.StatusCode != 200 {
		t.Fatalf("after refill: %d", resp.StatusCode)
	}
	if st := e.route("api"); st.LastErrorClass != ClassRateLimited || st.Requests != 4 || st.Refused != 1 {
		t.Fatalf("%+v", st)
	}
}

func TestRouteUpstreamErrors(t *testing.T) {
	t.Run("closes", func(t *testing.T) {
		e := newEnv(t, nil)
		setRoute(t, e, basicRoute(e, "api"))
		e.up.setExtra(func(w http.ResponseWriter, r *http.Request) bool {
			c, _, _ := http.NewResponseController(w).Hijack()
			c.Close()
			return true
		})
		resp, body := rawDo(t, e.route("api").Port, "GET", "/x")
		wantRefusal(t, resp, body, http.StatusBadGateway, ClassUpstreamError)
		if e.route("api").LastErrorClass != ClassUpstreamError {
			t.Fatal("class not recorded")
		}
	})
	t.Run("blocked", func(t *testing.T) {
		for _, addr := range []string{"127.0.0.1", "::ffff:127.0.0.1", "169.254.169.254", "::1", "fe80::1", "0.0.0.0", "ff02::1", "fd00:ec2::254", "::127.0.0.1"} {
			e := newEnv(t, func(o *Options) {
				o.Blocked = nil // default guard
				o.Resolve = func(context.Context, string) ([]netip.Addr, error) {
					return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr(addr)}, nil
				}
			})
			setRoute(t, e, basicRoute(e, "api"))
			resp, body := rawDo(t, e.route("api").Port, "GET", "/x")
			wantRefusal(t, resp, body, http.StatusBadGateway, ClassUpstreamError)
			if e.dials.Load() != 0 {
				t.Fatalf("%s: dialed", addr)
			}
		}
	})
	t.Run("badcert", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.RootCAs = x509.NewCertPool() })
		setRoute(t, e, basicRoute(e, "api"))
		resp, body := rawDo(t, e.route("api").Port, "GET", "/x")
		wantRefusal(t, resp, body, http.StatusBadGateway, ClassUpstreamError)
		if e.up.hits.Load() != 0 {
			t.Fatal("request reached an untrusted upstream")
		}
	})
	t.Run("connect_timeout", func(t *testing.T) {
		e := newEnv(t, func(o *Options) {
			o.ConnectTimeout = 200 * time.Millisecond
			o.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}
		})
		setRoute(t, e, basicRoute(e, "api"))
		resp, body := rawDo(t, e.route("api").Port, "GET", "/x")
		wantRefusal(t, resp, body, http.StatusGatewayTimeout, ClassUpstreamTimeout)
	})
	t.Run("header_timeout", func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.HeaderTimeout = 200 * time.Millisecond })
		setRoute(t, e, basicRoute(e, "api"))
		release := make(chan struct{})
		defer close(release)
		e.up.setExtra(func(w http.ResponseWriter, r *http.Request) bool {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return true
		})
		resp, body := rawDo(t, e.route("api").Port, "GET", "/x")
		wantRefusal(t, resp, body, http.StatusGatewayTimeout, ClassUpstreamTimeout)
	})
}

func TestRouteStreaming(t *testing.T) {
	e := newEnv(t, nil)
	setRoute(t, e, basicRoute(e, "api"))
	release := make(chan struct{})
	e.up.setExtra(func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		http.NewResponseController(w).Flush()
		<-release
		io.WriteString(w, "data: two\n\n")
		return true
	})
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(e.route("api").Port))))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("data: one\n\n"))
	if _, err := io.ReadFull(resp.Body, buf); err != nil || string(buf) != "data: one\n\n" {
		t.Fatalf("first event %q %v", buf, err)
	}
	close(release)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "data: two\n\n" {
		t.Fatalf("rest %q", rest)
	}
}

func TestRouteRefreshAndRemove(t *testing.T) {
	e := newEnv(t, nil)
	setRoute(t, e, basicRoute(e, "api"), basicRoute(e, "other"))
	port := e.route("api").Port
	otherPort := e.route("other").Port
	if resp, _ := rawDo(t, port, "GET", "/x"); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
	r := basicRoute(e, "api")
	r.Headers[0].Secret = canary + "-rotated"
	setRoute(t, e, r)
	if e.route("api").Port != port {
		t.Fatal("refresh changed the port")
	}
	if st := e.route("api"); st.Requests != 1 {
		t.Fatalf("counters lost: %+v", st)
	}
	rawDo(t, port, "GET", "/x")
	if v := e.up.last(t).Header.Get("X-Api-Key"); v != canary+"-rotated" {
		t.Fatalf("value not rotated: %q", v)
	}
	// Invalid config: previous set keeps running.
	bad := basicRoute(e, "api")
	bad.Headers[0].Secret = canary + "\r\nX: y"
	err := e.g.SetRoutes([]Route{bad, basicRoute(e, "new")})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "routes[0].headers[0].secret" {
		t.Fatalf("err %v", err)
	}
	if strings.Contains(err.Error(), canary) {
		t.Fatal("error leaks the secret")
	}
	if len(e.g.Routes()) != 1 || e.route("api").Port != port {
		t.Fatalf("routes changed: %+v", e.g.Routes())
	}
	rawDo(t, port, "GET", "/x")
	if v := e.up.last(t).Header.Get("X-Api-Key"); v != canary+"-rotated" {
		t.Fatalf("value changed by a refused config: %q", v)
	}
	// other was removed by the refresh: its port is closed.
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(otherPort))), time.Second); err == nil {
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, rerr := c.Read(make([]byte, 1))
		c.Close()
		if rerr == nil {
			t.Fatal("removed route still serving")
		}
	}
	// Remove everything; the port closes.
	setRoute(t, e)
	time.Sleep(50 * time.Millisecond)
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port))), time.Second); err == nil {
		c.Close()
		t.Fatal("removed route's port still open")
	}
	if len(e.g.Routes()) != 0 {
		t.Fatal("routes left")
	}
}

func TestRouteConnLimit(t *testing.T) {
	e := newEnv(t, nil)
	setRoute(t, e, basicRoute(e, "api"))
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(e.route("api").Port)))
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < maxClientConnsPerRoute; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	time.Sleep(100 * time.Millisecond)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
	if n, err := c.Read(make([]byte, 1)); err == nil || n > 0 {
		t.Fatal("65th connection served")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("65th connection not closed")
	}
	// Closing one frees a slot.
	conns[0].Close()
	conns = conns[1:]
	time.Sleep(100 * time.Millisecond)
	if resp, _ := rawDo(t, e.route("api").Port, "GET", "/x"); resp.StatusCode != 200 {
		t.Fatal(resp.StatusCode)
	}
}

func TestRouteCaps(t *testing.T) {
	e := newEnv(t, nil)
	mk := func(n int) []Route {
		var rs []Route
		for i := 0; i < n; i++ {
			rs = append(rs, basicRoute(e, fmt.Sprintf("r%d", i)))
		}
		return rs
	}
	if err := e.g.SetRoutes(mk(9)); err == nil {
		t.Fatal("9 routes accepted")
	}
	setRoute(t, e, mk(8)...)
	if len(e.g.Routes()) != 8 {
		t.Fatal("not 8 routes")
	}
	r := basicRoute(e, "r0")
	r.Headers = nil
	for i := 0; i < 17; i++ {
		r.Headers = append(r.Headers, Header{Name: fmt.Sprintf("X-H%d", i), Secret: canary})
	}
	if err := e.g.SetRoutes([]Route{r}); err == nil {
		t.Fatal("17 headers accepted")
	}
	r.Headers = r.Headers[:16]
	r.Rules = nil
	for i := 0; i < 33; i++ {
		r.Rules = append(r.Rules, Rule{Method: "GET", Path: fmt.Sprintf("/p%d", i)})
	}
	if err := e.g.SetRoutes([]Route{r}); err == nil {
		t.Fatal("33 rules accepted")
	}
	r.Rules = r.Rules[:32]
	setRoute(t, e, r)
	if len(e.g.Routes()) != 1 {
		t.Fatal("not 1 route")
	}
}

func TestRouteKeepAliveAndHeaderLimit(t *testing.T) {
	e := newEnv(t, nil)
	setRoute(t, e, basicRoute(e, "api"))
	port := e.route("api").Port
	for i := 0; i < 3; i++ {
		if resp, _ := rawDo(t, port, "GET", "/x"); resp.StatusCode != 200 {
			t.Fatal(resp.StatusCode)
		}
	}
	r := basicRoute(e, "api")
	r.Headers[0].Secret = canary + "-2"
	setRoute(t, e, r) // refresh keeps the upstream pool
	rawDo(t, port, "GET", "/x")
	if n := e.dials.Load(); n != 1 {
		t.Fatalf("%d upstream dials, want 1 (keep-alive)", n)
	}
	resp, _ := rawDo(t, port, "GET", "/x", "X-Big: "+strings.Repeat("a", 70<<10))
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("70 KiB header: %d", resp.StatusCode)
	}
}
