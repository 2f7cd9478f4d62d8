package hostguard

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	g, err := New(8080, Options{Bind: "127.0.0.2", SandboxID: "microvm-0b6c1a52", AllowedHosts: []string{"Dev.Example.com", "::2"}, AllowOrigins: []string{"https://App.example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"127.0.0.1:8080", "LOCALHOST:8080", "[::1]:8080", "127.0.0.2:8080", "microvm-0b6c1a52.localhost:8080", "dev.example.com:8080", "[::2]:8080"} {
		if !g.HostOK(h) {
			t.Errorf("host %q refused", h)
		}
	}
	for _, h := range []string{"", "127.0.0.1", "127.0.0.1:8081", "localhost.:8080", "evil.com:8080", "localhost:8080.evil.com", "127.0.0.1:8080@evil.com",
		"x.microvm-0b6c1a52.localhost:8080", "other.localhost:8080", "0.0.0.0:8080", "127.1:8080", "2130706433:8080", "[::ffff:127.0.0.1]:8080", "localhost:08080", " localhost:8080"} {
		if g.HostOK(h) {
			t.Errorf("host %q accepted", h)
		}
	}
	for _, o := range []string{"", "http://localhost:8080", "http://127.0.0.1:8080", "http://microvm-0b6c1a52.localhost:8080", "https://app.example.com"} {
		if !g.OriginOK(o) {
			t.Errorf("origin %q refused", o)
		}
	}
	for _, o := range []string{"null", "https://localhost:8080", "http://localhost:8081", "http://evil.com", "http://localhost:8080/", "file://", "https://app.example.com:443"} {
		if g.OriginOK(o) {
			t.Errorf("origin %q accepted", o)
		}
	}
	req := func(host string, origins ...string) *http.Request {
		r, _ := http.NewRequest("GET", "http://x/", nil)
		r.Host = host
		for _, o := range origins {
			r.Header.Add("Origin", o)
		}
		return r
	}
	for _, c := range []struct {
		r    *http.Request
		want int
	}{
		{req("localhost:8080"), 0},
		{req("rebind.evil.com:8080"), 421},
		{req("localhost:8080", "http://evil.com"), 403},
		{req("localhost:8080", "null"), 403},
		{req("localhost:8080", ""), 403},
		{req("localhost:8080", "http://localhost:8080", "http://localhost:8080"), 403},
		{req("localhost:8080", "http://localhost:8080"), 0},
	} {
		if got := c.r.Header.Get("Origin"); g.Check(c.r) != c.want {
			t.Errorf("Check(Host %q, Origin %q) = %d, want %d", c.r.Host, got, g.Check(c.r), c.want)
		}
	}
	// Port 80: the port may be left out.
	g80, _ := New(80, Options{})
	if !g80.HostOK("localhost") || !g80.HostOK("localhost:80") || !g80.OriginOK("http://localhost") {
		t.Error("port 80 without the port refused")
	}
}

func TestOptionsRefused(t *testing.T) {
	for name, o := range map[string]Options{
		"bind name":   {Bind: "localhost"},
		"bind zone":   {Bind: "fe80::1%eth0"},
		"sandbox id":  {SandboxID: "a.b"},
		"host port":   {AllowedHosts: []string{"x.com:80"}},
		"host empty":  {AllowedHosts: []string{""}},
		"host under":  {AllowedHosts: []string{"a_b.com"}},
		"origin path": {AllowOrigins: []string{"https://x.com/"}},
		"origin ftp":  {AllowOrigins: []string{"ftp://x.com"}},
		"origin null": {AllowOrigins: []string{"null"}},
		"origin user": {AllowOrigins: []string{"https://u@x.com"}},
		"origin port": {AllowOrigins: []string{"https://x.com:0"}},
		"origin star": {AllowOrigins: []string{"*"}},
	} {
		if _, err := New(8080, o); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := New(0, Options{}); !errors.Is(err, ErrInvalid) {
		t.Error("port 0 accepted")
	}
}

// FuzzCheck: whatever a client sends as Host and Origin, only the fixed
// set passes, and nothing panics.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"localhost:8080", "127.0.0.1:8080", "[::1]:8080", "evil:8080", "null", "http://localhost:8080", "LOCALHOST:8080"} {
		f.Add(s, s)
	}
	g, err := New(8080, Options{SandboxID: "sbx"})
	if err != nil {
		f.Fatal(err)
	}
	allowed := map[string]bool{"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true, "sbx.localhost:8080": true}
	f.Fuzz(func(t *testing.T, host, origin string) {
		if g.HostOK(host) != allowed[strings.ToLower(host)] {
			t.Fatalf("HostOK(%q) = %v", host, g.HostOK(host))
		}
		rest, isHTTP := strings.CutPrefix(strings.ToLower(origin), "http://")
		if want := origin == "" || isHTTP && allowed[rest]; g.OriginOK(origin) != want {
			t.Fatalf("OriginOK(%q) = %v", origin, g.OriginOK(origin))
		}
	})
}
