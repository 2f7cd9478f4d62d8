package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

const (
	interceptMarker = "INTERCEPTED\n"
	testPlaceholder = "RAYITO-PLACEHOLDER-00112233445566778899aabbccddeeff"
)

type served struct {
	host   string
	port   uint16
	replay []byte
}

// fakeInterceptor claims "host:port" entries, records what it serves and
// answers every connection with interceptMarker. CheckPlain flags heads
// carrying testPlaceholder.
type fakeInterceptor struct {
	claims map[string]bool

	mu     sync.Mutex
	served []served
	asked  []string // Intercepts calls
	plain  int      // CheckPlain calls
	// noGrant makes the claims header rules': intercepted only where the
	// policy allows them.
	noGrant bool
}

func newFakeInterceptor(claims ...string) *fakeInterceptor {
	f := &fakeInterceptor{claims: map[string]bool{}}
	for _, c := range claims {
		f.claims[c] = true
	}
	return f
}

func (f *fakeInterceptor) Intercepts(host string, port uint16) bool {
	hp := host + ":" + strconv.Itoa(int(port))
	f.mu.Lock()
	f.asked = append(f.asked, hp)
	f.mu.Unlock()
	return f.claims[hp]
}

// Grants: the fake's claims are placeholders' hosts unless noGrant.
func (f *fakeInterceptor) Grants(host string, port uint16) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.noGrant
}

func (f *fakeInterceptor) ServeIntercepted(_ context.Context, client net.Conn, replay []byte, host string, port uint16) {
	defer client.Close()
	f.mu.Lock()
	f.served = append(f.served, served{host, port, bytes.Clone(replay)})
	f.mu.Unlock()
	io.WriteString(client, interceptMarker)
}

func (f *fakeInterceptor) CheckPlain(head []byte) bool {
	f.mu.Lock()
	f.plain++
	f.mu.Unlock()
	return bytes.Contains(head, []byte(testPlaceholder))
}

func (f *fakeInterceptor) servedConns() []served {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.served)
}

func (f *fakeInterceptor) plainCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.plain
}

// redirectEnv is an env whose connections all look redirected to *dst
// (none when dst holds the zero value).
func redirectEnv(t *testing.T) (*env, *atomic.Pointer[netip.AddrPort]) {
	t.Helper()
	var dst atomic.Pointer[netip.AddrPort]
	dst.Store(&netip.AddrPort{})
	e := newEnv(t, func(o *Options) {
		o.OriginalDst = func(net.Conn) (netip.AddrPort, error) {
			d := *dst.Load()
			if !d.IsValid() {
				return netip.AddrPort{}, errors.New("not redirected")
			}
			return d, nil
		}
	})
	return e, &dst
}

func setDst(dst *atomic.Pointer[netip.AddrPort], s string) {
	d := netip.MustParseAddrPort(s)
	dst.Store(&d)
}

// readAll reads c until the proxy closes it.
func readAll(t *testing.T, c net.Conn) string {
	t.Helper()
	b, err := io.ReadAll(c)
	if err != nil && !errors.Is(err, net.ErrClosed) {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("read timed out after %q", b)
		}
	}
	return string(b)
}

func TestInterceptTransparentTLS(t *testing.T) {
	e, dst := redirectEnv(t)
	e.route("secret.test", 443, echoServer(t))
	e.route("other.test", 443, echoServer(t))
	fi := newFakeInterceptor("secret.test:443", "secret.test:8443")
	e.p.SetInterceptor(fi)
	e.p.SetPolicy(allowList{}, nil) // denies every name
	setDst(dst, "192.0.2.99:443")

	hello := clientHello(t, "Secret.Test.")
	c := e.dial()
	if _, err := c.Write(hello); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, c); got != interceptMarker {
		t.Fatalf("client got %q", got)
	}
	s := fi.servedConns()
	if len(s) != 1 || s[0].host != "secret.test" || s[0].port != 443 || !bytes.Equal(s[0].replay, hello) {
		t.Fatalf("served %+v (replay %d bytes, hello %d)", s, len(s[0].replay), len(hello))
	}

	// Another name: the policy decides (denied, closed, never resolved).
	c = e.dial()
	c.Write(clientHello(t, "other.test"))
	if got := readAll(t, c); got != "" {
		t.Fatalf("other.test got %q", got)
	}
	// The claimed name on a port the interceptor does not claim.
	setDst(dst, "192.0.2.99:8080")
	c = e.dial()
	c.Write(clientHello(t, "secret.test"))
	if got := readAll(t, c); got != "" {
		t.Fatalf("secret.test:8080 got %q", got)
	}
	// A non-443 port the interceptor claims is intercepted too (the
	// first byte tells TLS).
	setDst(dst, "192.0.2.99:8443")
	c = e.dial()
	c.Write(clientHello(t, "secret.test"))
	if got := readAll(t, c); got != interceptMarker {
		t.Fatalf("secret.test:8443 got %q", got)
	}
	if s := fi.servedConns(); len(s) != 2 || s[1].port != 8443 {
		t.Fatalf("served %+v", s)
	}

	if got := e.resolved(); len(got) != 0 {
		t.Errorf("resolved %v", got)
	}
	if got := e.dialed(); len(got) != 0 {
		t.Errorf("dialed %v", got)
	}
	if st := e.p.Stats(); st.Intercepted != 2 || st.Refused[ReasonNotAllowed] != 2 || st.Tunneled != 0 {
		t.Errorf("stats %+v", st)
	}

	// Without the interceptor the name is the policy's again.
	e.p.SetInterceptor(nil)
	setDst(dst, "192.0.2.99:443")
	c = e.dial()
	c.Write(clientHello(t, "secret.test"))
	if got := readAll(t, c); got != "" {
		t.Fatalf("after SetInterceptor(nil) got %q", got)
	}
	if st := e.p.Stats(); st.Intercepted != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestInterceptTransparentTLSRealClient(t *testing.T) {
	e, dst := redirectEnv(t)
	fi := newFakeInterceptor("secret.test:443")
	e.p.SetInterceptor(fi)
	setDst(dst, "192.0.2.99:443")
	raw := e.dial()
	tc := tls.Client(raw, &tls.Config{ServerName: "secret.test"})
	if err := tc.Handshake(); err == nil {
		t.Fatal("handshake with the fake interceptor succeeded")
	}
	s := fi.servedConns()
	if len(s) != 1 || s[0].host != "secret.test" || len(s[0].replay) == 0 || s[0].replay[0] != tlsRecordHandshake {
		t.Fatalf("served %+v", s)
	}
	if name, err := parseClientHelloSNI(s[0].replay); err != nil || name != "secret.test" {
		t.Errorf("replay is not the ClientHello: %q %v", name, err)
	}
}

func TestInterceptConnect(t *testing.T) {
	e := newEnv(t, nil)
	e.route("secret.test", 443, echoServer(t))
	fi := newFakeInterceptor("secret.test:443", "203.0.113.10:443")
	e.p.SetInterceptor(fi)
	e.p.SetPolicy(allowList{"allowed.test:443": true}, nil)

	c := e.dial()
	io.WriteString(c, "CONNECT Secret.Test:443 HTTP/1.1\r\nHost: secret.test:443\r\n\r\n")
	if got := readAll(t, c); got != "HTTP/1.1 200 Connection established\r\n\r\n"+interceptMarker {
		t.Fatalf("CONNECT got %q", got)
	}
	if s := fi.servedConns(); len(s) != 1 || s[0].host != "secret.test" || s[0].port != 443 || len(s[0].replay) != 0 {
		t.Fatalf("served %+v", s)
	}
	for _, authority := range []string{"secret.test:8443", "other.test:443", "203.0.113.10:443"} {
		_, br, status := e.connect(authority)
		body, _ := io.ReadAll(br)
		if !strings.Contains(status, " 403 ") || string(body) != "not_allowed\n" {
			t.Errorf("CONNECT %s: %q %q", authority, status, body)
		}
	}
	if len(fi.servedConns()) != 1 || len(e.resolved()) != 0 || len(e.dialed()) != 0 {
		t.Errorf("served %v resolved %v dialed %v", fi.servedConns(), e.resolved(), e.dialed())
	}
}

func TestInterceptSOCKS5(t *testing.T) {
	e := newEnv(t, nil)
	fi := newFakeInterceptor("secret.test:443", "203.0.113.10:443")
	e.p.SetInterceptor(fi)
	e.p.SetPolicy(ipPolicy{allowList{}, netip.MustParseAddr("192.0.2.1")}, nil)

	c := e.dial()
	if rep := socksConnect(t, c, socksAtypDomain, []byte("secret.test"), 443); rep != socksRepSucceeded {
		t.Fatalf("reply %d", rep)
	}
	if got := readAll(t, c); got != interceptMarker {
		t.Fatalf("SOCKS5 got %q", got)
	}
	if s := fi.servedConns(); len(s) != 1 || s[0].host != "secret.test" || s[0].port != 443 {
		t.Fatalf("served %+v", s)
	}
	// Another name, another port, and an IP literal (never intercepted,
	// whatever the interceptor claims): the policy's.
	c = e.dial()
	if rep := socksConnect(t, c, socksAtypDomain, []byte("other.test"), 443); rep != socksRepNotAllowed {
		t.Errorf("other.test: reply %d", rep)
	}
	c = e.dial()
	if rep := socksConnect(t, c, socksAtypDomain, []byte("secret.test"), 80); rep != socksRepNotAllowed {
		t.Errorf("secret.test:80: reply %d", rep)
	}
	c = e.dial()
	if rep := socksConnect(t, c, socksAtypIPv4, fakePublic.AsSlice(), 443); rep != socksRepNotAllowed {
		t.Errorf("IPv4 literal: reply %d", rep)
	}
	if len(fi.servedConns()) != 1 || len(e.resolved()) != 0 || len(e.dialed()) != 0 {
		t.Errorf("served %v resolved %v dialed %v", fi.servedConns(), e.resolved(), e.dialed())
	}
	if st := e.p.Stats(); st.Intercepted != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestPlainPlaceholderBlocked(t *testing.T) {
	hits := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Host + " " + r.RequestURI
		io.WriteString(w, "origin")
	}))
	defer srv.Close()
	e, dst := redirectEnv(t)
	e.route("plain.test", 80, srv.Listener.Addr().String())
	e.p.SetPolicy(allowList{"plain.test:80": true}, nil)
	fi := newFakeInterceptor()
	e.p.SetInterceptor(fi)

	blocked := func(what, req string) {
		t.Helper()
		c := e.dial()
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusForbidden || string(b) != ReasonPlaceholder+"\n" {
			t.Fatalf("%s: %d %q", what, resp.StatusCode, b)
		}
	}
	blocked("absolute-form header", "GET http://plain.test/ HTTP/1.1\r\nAuthorization: Bearer "+testPlaceholder+"\r\n\r\n")
	blocked("absolute-form target", "GET http://plain.test/?key="+testPlaceholder+" HTTP/1.1\r\n\r\n")
	setDst(dst, "192.0.2.99:80")
	blocked("transparent port 80", "GET / HTTP/1.1\r\nHost: plain.test\r\nX-Key: "+testPlaceholder+"\r\n\r\n")
	if got := e.dialed(); len(got) != 0 {
		t.Fatalf("dialed %v", got)
	}
	if got := e.resolved(); len(got) != 0 {
		t.Fatalf("resolved %v", got)
	}
	if st := e.p.Stats(); st.Refused[ReasonPlaceholder] != 3 {
		t.Errorf("stats %+v", st)
	}

	// Heads without a placeholder pass, both ways.
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: plain.test\r\n\r\n", // transparent
		"GET http://plain.test/clean HTTP/1.1\r\n\r\n",
	} {
		if strings.HasPrefix(req, "GET http") {
			dst.Store(&netip.AddrPort{})
		}
		c := e.dial()
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%q: %v %v", req, resp, err)
		}
		<-hits
	}
	if n := fi.plainCalls(); n != 5 {
		t.Errorf("CheckPlain called %d times, want 5", n)
	}
	select {
	case h := <-hits:
		t.Errorf("the origin got a blocked request: %s", h)
	default:
	}
}

func TestTransparentFallsBackToOriginalIP(t *testing.T) {
	pool, cert := testCA(t, "unlisted.test")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	e, dst := redirectEnv(t)
	e.mu.Lock()
	e.ports[netip.AddrPortFrom(fakePublic, 443).String()] = ln.Addr().String()
	e.names["unlisted.test"] = []netip.Addr{netip.MustParseAddr("203.0.113.77")}
	e.mu.Unlock()
	e.p.SetInterceptor(newFakeInterceptor("secret.test:443"))
	e.p.SetPolicy(ipPolicy{allowList{}, fakePublic}, nil)

	// The name is not allowed, the original destination is: dialed as it
	// would have been directly, the name never resolved.
	setDst(dst, netip.AddrPortFrom(fakePublic, 443).String())
	raw := e.dial()
	tc := tls.Client(raw, &tls.Config{ServerName: "unlisted.test", RootCAs: pool})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if err := echoLine(tc, bufio.NewReader(tc), "direct"); err != nil {
		t.Fatal(err)
	}
	if got := e.dialed(); !slices.Equal(got, []string{"203.0.113.10:443"}) {
		t.Errorf("dialed %v", got)
	}
	if got := e.resolved(); len(got) != 0 {
		t.Errorf("resolved %v", got)
	}
	tc.Close()

	// An original destination the policy does not allow: refused.
	setDst(dst, "192.0.2.99:443")
	raw = e.dial()
	raw.Write(clientHello(t, "unlisted.test"))
	if got := readAll(t, raw); got != "" {
		t.Errorf("got %q", got)
	}
	// The guard still applies to the original destination.
	e.p.SetPolicy(ipPolicy{allowList{}, netip.MustParseAddr("127.0.0.1")}, nil)
	setDst(dst, "127.0.0.1:443")
	raw = e.dial()
	raw.Write(clientHello(t, "unlisted.test"))
	if got := readAll(t, raw); got != "" {
		t.Errorf("got %q", got)
	}
	if got := e.dialed(); len(got) != 1 {
		t.Errorf("dialed %v", got)
	}
	if st := e.p.Stats(); st.Refused[ReasonNotAllowed] != 1 || st.Refused[ReasonBlockedAddress] != 1 || st.Tunneled != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestInterceptWithoutGrant: a host the interceptor claims but does not
// grant (a header rule's) is intercepted where the policy allows it and
// refused like any other host where it does not: a rule opens nothing.
func TestInterceptWithoutGrant(t *testing.T) {
	e := newEnv(t, nil)
	fi := newFakeInterceptor("allowed.test:443", "denied.test:443")
	fi.noGrant = true
	e.p.SetInterceptor(fi)
	e.p.SetPolicy(allowList{"allowed.test:443": true}, nil)

	c := e.dial()
	io.WriteString(c, "CONNECT allowed.test:443 HTTP/1.1\r\nHost: allowed.test:443\r\n\r\n")
	if got := readAll(t, c); got != "HTTP/1.1 200 Connection established\r\n\r\n"+interceptMarker {
		t.Fatalf("CONNECT to an allowed ruled host: %q", got)
	}
	_, br, status := e.connect("denied.test:443")
	body, _ := io.ReadAll(br)
	if !strings.Contains(status, " 403 ") || string(body) != "not_allowed\n" {
		t.Errorf("CONNECT to a denied ruled host: %q %q", status, body)
	}
	if s := fi.servedConns(); len(s) != 1 || s[0].host != "allowed.test" {
		t.Errorf("served %+v", s)
	}
	if len(e.dialed()) != 0 {
		t.Errorf("dialed %v", e.dialed())
	}
}
