package tunnel

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/localplatform"
)

// fakeProxy accepts tunnels with the token "good" to backend and refuses
// others with 403, as the platform's proxy does.
type fakeProxy struct {
	srv      *httptest.Server
	upgrades atomic.Int32
	refused  atomic.Int32
}

func newFakeProxy(t *testing.T, backend string) *fakeProxy {
	p := &fakeProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != localplatform.TunnelProtocol || r.Host != "vm.example" || r.Header.Get("X-Aws-Proxy-Port") != "8080" {
			http.Error(w, "bad tunnel request", http.StatusBadRequest)
			return
		}
		if r.Header.Get("X-Aws-Proxy-Auth") != "good" {
			p.refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			json.NewEncoder(w).Encode(map[string]string{"message": "Forbidden"})
			return
		}
		guest, err := net.Dial("tcp", backend)
		if err != nil {
			http.Error(w, "bad gateway", http.StatusBadGateway)
			return
		}
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			guest.Close()
			return
		}
		p.upgrades.Add(1)
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+localplatform.TunnelProtocol+"\r\n\r\n")
		go func() { io.Copy(guest, c); guest.Close() }()
		go func() { io.Copy(c, guest); c.Close() }()
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// tokens hands out its list in order, then the last one.
type tokens struct {
	mu          sync.Mutex
	list        []string
	invalidated []string
}

func (s *tokens) Get(context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := s.list[0]
	if len(s.list) > 1 {
		s.list = s.list[1:]
	}
	return tok, nil
}

func (s *tokens) Invalidate(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.invalidated = append(s.invalidated, tok)
}

func backend(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var proxyHeaders []string
		for k := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-aws-proxy-") {
				proxyHeaders = append(proxyHeaders, k)
			}
		}
		json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "access": r.Header.Get("X-Access-Token"), "proxy": proxyHeaders})
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func get(t *testing.T, c *http.Client) map[string]any {
	t.Helper()
	res, err := c.Get("http://127.0.0.1:1/anything")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var got map[string]any
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestTransport: requests reach rayd through one kept-alive tunnel, with
// the endpoint as Host, the access token, and no proxy header.
func TestTransport(t *testing.T) {
	p := newFakeProxy(t, backend(t))
	d := &Dialer{Addr: p.srv.Listener.Addr().String(), Endpoint: "vm.example", Port: 8080, Tokens: &tokens{list: []string{"good"}}}
	c := &http.Client{Transport: Transport(d, "access-1")}
	for range 3 {
		got := get(t, c)
		if got["host"] != "vm.example" || got["access"] != "access-1" || got["proxy"] != nil {
			t.Fatalf("rayd saw %v", got)
		}
	}
	if n := p.upgrades.Load(); n != 1 {
		t.Fatalf("%d tunnels for three sequential requests, want 1", n)
	}
	c.CloseIdleConnections()
}

// TestRefusedTokenRetriedOnce: a 403 drops the token and the dial is
// retried once with a new one; a second 403 is the caller's error.
func TestRefusedTokenRetriedOnce(t *testing.T) {
	p := newFakeProxy(t, backend(t))
	toks := &tokens{list: []string{"stale", "good"}}
	d := &Dialer{Addr: p.srv.Listener.Addr().String(), Endpoint: "vm.example", Port: 8080, Tokens: toks}
	if got := get(t, &http.Client{Transport: Transport(d, "")}); got["host"] != "vm.example" {
		t.Fatalf("rayd saw %v", got)
	}
	if len(toks.invalidated) != 1 || toks.invalidated[0] != "stale" {
		t.Fatalf("invalidated %v", toks.invalidated)
	}

	bad := &Dialer{Addr: p.srv.Listener.Addr().String(), Endpoint: "vm.example", Port: 8080, Tokens: &tokens{list: []string{"bad"}}}
	_, err := bad.DialContext(context.Background(), "tcp", "ignored")
	var te *localplatform.TunnelError
	if !errors.As(err, &te) || te.Status != http.StatusForbidden {
		t.Fatalf("err = %v, want a 403 TunnelError", err)
	}
	if n := p.refused.Load(); n != 3 {
		t.Fatalf("%d refusals, want 3 (one, then two)", n)
	}
}

// TestDialTimeout: a proxy that never answers fails the dial in Timeout.
func TestDialTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	d := &Dialer{Addr: l.Addr().String(), Endpoint: "vm.example", Port: 8080, Tokens: &tokens{list: []string{"good"}}, Timeout: 200 * time.Millisecond}
	start := time.Now()
	if _, err := d.DialContext(context.Background(), "tcp", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the dial outlived its timeout")
	}
}

// perRequest records the requests it answers.
type perRequest struct {
	n    atomic.Int32
	body atomic.Value
}

func (p *perRequest) RoundTrip(req *http.Request) (*http.Response, error) {
	p.n.Add(1)
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		p.body.Store(string(b))
	}
	return &http.Response{StatusCode: 299, Body: http.NoBody, Header: http.Header{}, Request: req}, nil
}

// TestAutoFallsBack: a refused tunnel is answered by the per-request path
// (the body replayed); a platform that does not know tunnels (its answer
// is not the proxy's JSON) turns them off, the proxy's own refusals do not.
func TestAutoFallsBack(t *testing.T) {
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NotFound(w, r) // a platform older than tunnels: rayd's 404 for GET /
	}))
	defer old.Close()
	p := newFakeProxy(t, backend(t))
	for _, tc := range []struct {
		name, addr, token string
		tunneling         bool
	}{
		{"older platform", old.Listener.Addr().String(), "good", false},
		{"refused token", p.srv.Listener.Addr().String(), "bad", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := &perRequest{}
			a := &Auto{Tunnel: Transport(&Dialer{Addr: tc.addr, Endpoint: "vm.example", Port: 8080, Tokens: &tokens{list: []string{tc.token}}}, ""), PerRequest: pr}
			req, _ := http.NewRequest("POST", "http://127.0.0.1:1/x", strings.NewReader("payload"))
			res, err := a.RoundTrip(req)
			if err != nil || res.StatusCode != 299 || pr.n.Load() != 1 || pr.body.Load() != "payload" {
				t.Fatalf("got %v, %v after %d per-request calls (body %v)", res, err, pr.n.Load(), pr.body.Load())
			}
			if a.Tunneling() != tc.tunneling {
				t.Fatalf("Tunneling() = %v, want %v", a.Tunneling(), tc.tunneling)
			}
		})
	}
	// Through a working proxy nothing takes the per-request path.
	pr := &perRequest{}
	a := &Auto{Tunnel: Transport(&Dialer{Addr: p.srv.Listener.Addr().String(), Endpoint: "vm.example", Port: 8080, Tokens: &tokens{list: []string{"good"}}}, ""), PerRequest: pr}
	if got := get(t, &http.Client{Transport: a}); got["host"] != "vm.example" || pr.n.Load() != 0 {
		t.Fatalf("rayd saw %v; per-request calls %d", got, pr.n.Load())
	}
	a.CloseIdleConnections()
}
