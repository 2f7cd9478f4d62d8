package events

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

type addrVectors struct {
	Blocked []string `json:"blocked"`
	Allowed []string `json:"allowed"`
}

type urlVectors struct {
	Accepted []struct {
		URL       string `json:"url"`
		Canonical string `json:"canonical"`
	} `json:"accepted"`
	Rejected []struct {
		URL   string `json:"url"`
		Error string `json:"error"` // "invalid" (ErrInvalidURL) or "blocked" (ErrBlockedURL)
	} `json:"rejected"`
}

func TestBlockedAddrVectors(t *testing.T) {
	var v addrVectors
	loadJSON(t, "ssrf-address-vectors.json", &v)
	if len(v.Blocked) < 29 || len(v.Allowed) < 8 {
		t.Fatalf("want at least 29 + 8 vectors, have %d + %d", len(v.Blocked), len(v.Allowed))
	}
	for _, s := range v.Blocked {
		if !BlockedAddr(netip.MustParseAddr(s)) {
			t.Errorf("%s allowed, want blocked", s)
		}
	}
	for _, s := range v.Allowed {
		if BlockedAddr(netip.MustParseAddr(s)) {
			t.Errorf("%s blocked, want allowed", s)
		}
	}
	if !BlockedAddr(netip.Addr{}) {
		t.Error("the zero Addr is allowed")
	}
}

// TestBlockedAddrMatchesStdlib: every address the standard library calls
// loopback, private, link-local, multicast or unspecified is blocked, in
// both families and in the mapped form.
func TestBlockedAddrMatchesStdlib(t *testing.T) {
	var b [16]byte
	for i := range 200000 {
		// A cheap deterministic spread over the address space.
		x := uint64(i) * 0x9e3779b97f4a7c15
		for j := range 8 {
			b[j] = byte(x >> (8 * j))
			b[8+j] = byte((x * 31) >> (8 * j))
		}
		for _, a := range []netip.Addr{netip.AddrFrom16(b), netip.AddrFrom4([4]byte(b[:4])), netip.AddrFrom16(b).Unmap()} {
			std := a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
				a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified()
			if std && !BlockedAddr(a) {
				t.Fatalf("%s is special to net/netip but allowed", a)
			}
			if a.Is4() {
				m := netip.AddrFrom16(a.As16())
				if BlockedAddr(m) != BlockedAddr(a) {
					t.Fatalf("%s and %s disagree", a, m)
				}
			}
		}
	}
}

func TestCheckWebhookURLVectors(t *testing.T) {
	var v urlVectors
	loadJSON(t, "webhook-url-vectors.json", &v)
	if len(v.Accepted) < 9 || len(v.Rejected) < 37 {
		t.Fatalf("want at least 9 + 37 vectors, have %d + %d", len(v.Accepted), len(v.Rejected))
	}
	for _, c := range v.Accepted {
		u, err := CheckWebhookURL(c.URL)
		if err != nil {
			t.Errorf("%q: %v", c.URL, err)
			continue
		}
		if u.String() != c.Canonical {
			t.Errorf("%q: canonical %q, want %q", c.URL, u.String(), c.Canonical)
		}
		// The canonical form is accepted as it is.
		if u2, err := CheckWebhookURL(u.String()); err != nil || u2.String() != u.String() {
			t.Errorf("%q: canonical form not stable: %v", c.URL, err)
		}
	}
	for _, c := range v.Rejected {
		u, err := CheckWebhookURL(c.URL)
		want := map[string]error{"invalid": ErrInvalidURL, "blocked": ErrBlockedURL}[c.Error]
		if want == nil {
			t.Fatalf("%q: bad expectation %q", c.URL, c.Error)
		}
		if u != nil || !errors.Is(err, want) {
			t.Errorf("%q: %v, want %v", c.URL, err, want)
			continue
		}
		if c.URL != "" && strings.Contains(err.Error(), c.URL) {
			t.Errorf("%q: error quotes the URL", c.URL)
		}
	}
}

func TestCheckWebhookURLLength(t *testing.T) {
	base := "https://example.com/"
	ok := base + strings.Repeat("a", MaxWebhookURLLen-len(base))
	if _, err := CheckWebhookURL(ok); err != nil {
		t.Errorf("2048 bytes: %v", err)
	}
	if _, err := CheckWebhookURL(ok + "a"); !errors.Is(err, ErrInvalidURL) {
		t.Errorf("2049 bytes: %v", err)
	}
}

func TestParseIPv4Host(t *testing.T) {
	for in, want := range map[string]string{
		"0":               "0.0.0.0",
		"0x":              "0.0.0.0",
		"4294967295":      "255.255.255.255",
		"0xffffffff":      "255.255.255.255",
		"037777777777":    "255.255.255.255",
		"1.2.65535":       "1.2.255.255",
		"1.16777215":      "1.255.255.255",
		"0x7f.1":          "127.0.0.1",
		"0177.0.0.1":      "127.0.0.1",
		"00000127.1":      "87.0.0.1",
		"8.8.8.8.":        "8.8.8.8",
		"0X08.0x08.8.010": "8.8.8.8",
	} {
		a, ok, err := parseIPv4Host(in)
		if err != nil || !ok || a.String() != want {
			t.Errorf("%s: %v %v %v, want %s", in, a, ok, err, want)
		}
	}
	for _, in := range []string{"4294967296", "1.2.65536", "256.0.0.1", "1.2.3.4.5", "09", "0x1g", "a.1", "1..1", ".1", "0xfffffffff"} {
		if _, ok, err := parseIPv4Host(in); err == nil && ok {
			t.Errorf("%s parsed", in)
		}
	}
	for _, in := range []string{"example.com", "1.example", "0xg"} {
		if _, ok, err := parseIPv4Host(in); ok || err != nil {
			t.Errorf("%s: ok=%v err=%v, want not numeric", in, ok, err)
		}
	}
}

func FuzzCheckWebhookURL(f *testing.F) {
	var v urlVectors
	loadJSON(f, "webhook-url-vectors.json", &v)
	for _, c := range v.Accepted {
		f.Add(c.URL)
	}
	for _, c := range v.Rejected {
		f.Add(c.URL)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := CheckWebhookURL(raw)
		if err != nil {
			if u != nil || !(errors.Is(err, ErrInvalidURL) || errors.Is(err, ErrBlockedURL)) {
				t.Fatalf("bad error %v (url %v)", err, u)
			}
			return
		}
		if u.Scheme != "https" || u.User != nil || u.Fragment != "" || u.Hostname() == "" {
			t.Fatalf("accepted %q", raw)
		}
		if a, err := netip.ParseAddr(u.Hostname()); err == nil && BlockedAddr(a) {
			t.Fatalf("accepted blocked %q", raw)
		}
		if _, err := CheckWebhookURL(u.String()); err != nil {
			t.Fatalf("canonical form of %q refused: %v", raw, err)
		}
	})
}
