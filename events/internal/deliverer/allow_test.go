package deliverer

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/rayito-dev/rayito/proto/events"
)

func loopbackOnly(a netip.Addr) bool { return a.Unmap().IsLoopback() }

// TestCheckURLAllow: with an allow function only the literal addresses it
// accepts pass on top of events.CheckWebhookURL; every other blocked
// class, name and malformed URL stays refused.
func TestCheckURLAllow(t *testing.T) {
	ok := map[string]string{
		"https://127.0.0.1:8443/hook":  "https://127.0.0.1:8443/hook",
		"https://[::1]:8443/hook":      "https://[::1]:8443/hook",
		"https://[::1]/hook":           "https://[::1]/hook",
		"https://127.0.0.1/":           "https://127.0.0.1/",
		"https://hooks.example.com/x":  "https://hooks.example.com/x",
		"https://[::ffff:127.0.0.1]/h": "https://127.0.0.1/h",
	}
	for in, want := range ok {
		u, err := CheckURL(in, loopbackOnly)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if u.String() != want {
			t.Errorf("%s: got %s, want %s", in, u, want)
		}
	}
	bad := []string{
		"http://127.0.0.1:8443/hook",     // not https
		"https://user@127.0.0.1/hook",    // user info
		"https://127.0.0.1/hook#frag",    // fragment
		"https://127.0.0.1:0/hook",       // port
		"https://localhost/hook",         // a name, never let through
		"https://127.1/hook",             // another spelling
		"https://10.0.0.1/hook",          // RFC 1918
		"https://169.254.169.254/latest", // link-local
		"https://192.168.1.1/",           // RFC 1918
		"https://[fe80::1]/",             // link-local v6
		"https://0.0.0.0/",               // this network
	}
	for _, in := range bad {
		if _, err := CheckURL(in, loopbackOnly); err == nil {
			t.Errorf("%s accepted", in)
		} else if !errors.Is(err, events.ErrInvalidURL) && !errors.Is(err, events.ErrBlockedURL) {
			t.Errorf("%s: untyped error %v", in, err)
		}
	}
	if _, err := CheckURL("https://127.0.0.1:8443/hook", nil); !errors.Is(err, events.ErrBlockedURL) {
		t.Fatalf("without allow: %v", err)
	}
	d := &Deliverer{AllowAddr: loopbackOnly}
	if d.blocked(netip.MustParseAddr("127.0.0.1")) || !d.blocked(netip.MustParseAddr("10.1.2.3")) || d.blocked(netip.MustParseAddr("8.8.8.8")) {
		t.Fatal("blocked with AllowAddr")
	}
	if !(&Deliverer{}).blocked(netip.MustParseAddr("127.0.0.1")) {
		t.Fatal("loopback allowed by default")
	}
}

// FuzzCheckURLAllow: whatever the input, an accepted URL is either one
// events.CheckWebhookURL accepts or one whose host is a loopback literal,
// and is https.
func FuzzCheckURLAllow(f *testing.F) {
	for _, s := range []string{"https://127.0.0.1:8443/hook", "https://[::1]/x", "https://10.0.0.1/", "https://localhost/", "http://127.0.0.1/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := CheckURL(raw, loopbackOnly)
		if err != nil {
			return
		}
		if u.Scheme != "https" {
			t.Fatalf("%q accepted as %s", raw, u)
		}
		if _, err := events.CheckWebhookURL(raw); err == nil {
			return
		}
		a, perr := netip.ParseAddr(u.Hostname())
		if perr != nil || !a.IsLoopback() {
			t.Fatalf("%q accepted as %s", raw, u)
		}
	})
}
