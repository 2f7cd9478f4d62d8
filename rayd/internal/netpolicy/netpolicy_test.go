package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func mustParse(t *testing.T, allow, deny []string) Policy {
	t.Helper()
	p, err := Parse(allow, deny)
	if err != nil {
		t.Fatalf("Parse(%q, %q): %v", allow, deny, err)
	}
	return p
}

func TestParseCanonical(t *testing.T) {
	p := mustParse(t,
		[]string{"10.1.2.3/8", "2001:db8::1", "API.Example.com.", "*.example.org:8443", "api.example.com:8080", "10.0.0.0/8", "1.2.3.4"},
		[]string{"ALL_TRAFFIC", "192.0.2.0/24"})
	if got, want := p.AllowOut(), []string{"1.2.3.4", "10.0.0.0/8", "2001:db8::1", "api.example.com", "api.example.com:8080", "*.example.org:8443"}; !slices.Equal(got, want) {
		t.Errorf("AllowOut = %q, want %q", got, want)
	}
	if got, want := p.DenyOut(), []string{"ALL_TRAFFIC", "192.0.2.0/24"}; !slices.Equal(got, want) {
		t.Errorf("DenyOut = %q, want %q", got, want)
	}
	if got, want := p.HostPorts(), []uint16{80, 443, 8080, 8443}; !slices.Equal(got, want) {
		t.Errorf("HostPorts = %v, want %v", got, want)
	}
	if got := p.DenyCIDRs(); len(got) != 3 || got[0] != netip.MustParsePrefix("0.0.0.0/0") || got[2] != netip.MustParsePrefix("::/0") {
		t.Errorf("DenyCIDRs = %v", got)
	}
	if p.DenyAll() {
		t.Error("DenyAll with allowed CIDRs")
	}
	again := mustParse(t, p.AllowOut(), p.DenyOut())
	if !again.Equal(p) {
		t.Errorf("re-parse differs: %v vs %v", again.AllowOut(), p.AllowOut())
	}
}

func TestPredicates(t *testing.T) {
	if !(Policy{}).Unrestricted() || !mustParse(t, nil, nil).Unrestricted() {
		t.Error("empty policy not unrestricted")
	}
	da := mustParse(t, []string{"*.example.com"}, []string{"0.0.0.0/1", "128.0.0.0/1", "::/0"})
	if !da.DenyAll() || da.Unrestricted() {
		t.Error("split halves + ::/0 should be deny-all")
	}
	if mustParse(t, nil, []string{"0.0.0.0/1", "::/0"}).DenyAll() {
		t.Error("half of IPv4 is not deny-all")
	}
	if mustParse(t, nil, []string{"0.0.0.0/0"}).DenyAll() {
		t.Error("IPv4 only is not deny-all")
	}
	p := mustParse(t, []string{"10.0.0.0/8", "api.example.com", "*.example.org:8443"}, []string{"ALL_TRAFFIC"})
	for _, tc := range []struct {
		addr string
		want bool
	}{{"10.1.1.1", true}, {"::ffff:10.1.1.1", true}, {"11.0.0.1", false}, {"2001:db8::1", false}} {
		if got := p.AllowsIP(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("AllowsIP(%s) = %v", tc.addr, got)
		}
	}
	if p.AllowsIP(netip.Addr{}) {
		t.Error("invalid address allowed")
	}
	if !mustParse(t, nil, []string{"10.0.0.0/8"}).AllowsIP(netip.MustParseAddr("8.8.8.8")) {
		t.Error("not denied must be allowed")
	}
	for _, tc := range []struct {
		name string
		port uint16
		want bool
	}{
		{"api.example.com", 443, true}, {"API.EXAMPLE.COM.", 80, true}, {"api.example.com", 8443, false},
		{"x.example.org", 8443, true}, {"a.b.example.org", 8443, true}, {"example.org", 8443, false},
		{"x.example.org", 443, false}, {"xexample.org", 8443, false}, {"10.0.0.1", 443, false},
		{"*.example.org", 8443, false}, {"", 443, false},
	} {
		if got := p.AllowsHost(tc.name, tc.port); got != tc.want {
			t.Errorf("AllowsHost(%q, %d) = %v", tc.name, tc.port, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("a", 64) + ".com"
	for _, tc := range []struct {
		allow, deny []string
	}{
		{[]string{""}, nil},
		{[]string{"10.0.0.0/33"}, nil},
		{[]string{"::ffff:1.2.3.4"}, nil},
		{[]string{"::ffff:0:0/96"}, nil},
		{[]string{"fe80::1%eth0"}, nil},
		{[]string{"localhost"}, nil},
		{[]string{"*.com"}, nil},
		{[]string{"a.*.com"}, nil},
		{[]string{"*example.com"}, nil},
		{[]string{"-a.example.com"}, nil},
		{[]string{long}, nil},
		{[]string{"bücher.de"}, nil},
		{[]string{"example.com:0"}, nil},
		{[]string{"example.com:65536"}, nil},
		{[]string{"example.com:+80"}, nil},
		{[]string{"1.2.3.4:80"}, nil},
		{[]string{"[::1]:80"}, nil},
		{[]string{"a..com"}, nil},
		{[]string{"a_b.com"}, nil},
		{nil, []string{"example.com"}},
		{make([]string, 257), nil},
	} {
		_, err := Parse(tc.allow, tc.deny)
		var pe *Error
		if !errors.Is(err, ErrInvalid) || !errors.As(err, &pe) {
			t.Errorf("Parse(%q, %q) = %v, want *Error wrapping ErrInvalid", tc.allow, tc.deny, err)
		}
	}
	hosts := make([]string, 65)
	for i := range hosts {
		hosts[i] = "h" + strings.Repeat("x", i%10) + string(rune('a'+i%26)) + ".example.com"
	}
	if _, err := Parse(hosts, nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("65 hosts: %v", err)
	}
}

// An error names the list and the index of the entry, never the entry:
// an entry may be an internal name, and errors reach logs and clients.
func TestParseErrorsNameListAndIndex(t *testing.T) {
	const secret = "db-Zq8-internal"
	for _, tc := range []struct {
		allow, deny []string
		want        string
	}{
		{[]string{"10.0.0.0/8", "api.example.com", "ok.example.org", secret + ".localhost"}, nil, "allow_out[3]: a host name under .localhost is not allowed"},
		{[]string{secret + ".example.com:99999"}, nil, "allow_out[0]: port must be 1-65535"},
		{[]string{"10.0.0.0/8"}, []string{"0.0.0.0/0", secret + ".example.com"}, "deny_out[1]: deny_out takes only CIDRs, IP addresses or ALL_TRAFFIC"},
		{nil, []string{"10.0.0.0/8", "10.0.0." + secret + "/8"}, "deny_out[1]: not a valid CIDR"},
		{[]string{secret + "_x.example.com"}, nil, "allow_out[0]: invalid character in host name"},
		{[]string{"a." + strings.Repeat("z", 300)}, nil, "allow_out[0]: host name longer than 253 bytes"},
	} {
		_, err := Parse(tc.allow, tc.deny)
		var pe *Error
		if !errors.As(err, &pe) || !errors.Is(err, ErrInvalid) {
			t.Fatalf("Parse(%q, %q) = %v", tc.allow, tc.deny, err)
		}
		if pe.Where() != tc.want || err.Error() != "netpolicy: "+tc.want {
			t.Errorf("Parse(%q, %q) = %q, want %q", tc.allow, tc.deny, err, tc.want)
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "zzzz") {
			t.Errorf("the error echoes the entry: %q", err)
		}
	}
	hosts := make([]string, 70)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d.example.com", i)
	}
	if _, err := Parse(hosts, nil); err == nil || err.Error() != "netpolicy: allow_out[64]: more than 64 host entries" {
		t.Errorf("65 hosts: %v", err)
	}
	if _, err := Parse(make([]string, 200), make([]string, 57)); err == nil || err.Error() != "netpolicy: 257 entries, at most 256 allowed" {
		t.Errorf("257 entries: %v", err)
	}
}

// "localhost" and every name under ".localhost" (RFC 6761: loopback) are
// refused in allow_out in every spelling, before anything is resolved,
// and never match a rule.
func TestParseRefusesLocalhostNames(t *testing.T) {
	for _, e := range []string{
		"localhost", "LOCALHOST", "localhost.", "localhost:8080",
		"x.localhost", "X.LocalHost", "x.localhost.", "x.localhost:443", "a.b.c.localhost", "api.example.com.localhost",
		"*.localhost", "*.localhost:80", "*.x.localhost", "*.X.LOCALHOST.:8443",
	} {
		_, err := Parse([]string{"api.example.com", e}, nil)
		var pe *Error
		if !errors.As(err, &pe) || pe.List != ListAllowOut || pe.Index != 1 || pe.Reason != reasonLocalhost {
			t.Errorf("allow_out %q: %v", e, err)
		}
	}
	for _, name := range []string{"localhost", "Localhost.", "x.localhost", "A.B.LOCALHOST."} {
		if !LocalhostName(name) {
			t.Errorf("LocalhostName(%q) = false", name)
		}
	}
	for _, name := range []string{"", "localhost.com", "xlocalhost", "localhost.example.com", "mylocalhost.", "ocalhost", "localhos"} {
		if LocalhostName(name) {
			t.Errorf("LocalhostName(%q) = true", name)
		}
	}
	// Names near it stay valid.
	mustParse(t, []string{"localhost.example.com", "xlocalhost.com", "*.localhost.example.com"}, nil)
	p := mustParse(t, []string{"*.example.com"}, nil)
	if p.AllowsHost("x.localhost", 443) || p.AllowsHost("localhost", 443) {
		t.Error("a localhost name matched a rule")
	}
}

// knownReason reports whether r is one of the package's fixed reasons (or
// one of its counted limits): an error never carries text of the entry.
func knownReason(r string) bool {
	switch r {
	case reasonEmpty, reasonCIDR, reasonMappedPrefix, reasonZone, reasonMappedAddr, reasonIP, reasonDenyHost,
		reasonPort, reasonTooManyHosts, reasonEmptyName, reasonLongName, reasonLocalhost, reasonOneLabel,
		reasonLabelLen, reasonLabelHyphen, reasonWildcard, reasonNonASCII, reasonNameChar, reasonNumericLabel:
		return true
	}
	var n int
	_, err := fmt.Sscanf(r, "%d entries, at most 256 allowed", &n)
	return err == nil && fmt.Sprintf("%d entries, at most 256 allowed", n) == r
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "ALL_TRAFFIC", "::/0", "api.example.com", "*.example.com:8443",
		"1.2.3.4", "::ffff:1.2.3.4", "example.com.", "a.b:1", "2001:db8::/32",
		"localhost", "x.localhost", "X.LOCALHOST.:443", "*.localhost", "*.a.localhost:80", "localhost.example.com"} {
		f.Add(s, s+"\n0.0.0.0/0")
	}
	f.Fuzz(func(t *testing.T, a, d string) {
		allow, deny := strings.Split(a, "\n"), strings.Split(d, "\n")
		p, err := Parse(allow, deny)
		if err != nil {
			var pe *Error
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &pe) {
				t.Fatalf("error is not an *Error wrapping ErrInvalid: %v", err)
			}
			// The list and index, and a fixed reason: never the entry.
			switch {
			case !knownReason(pe.Reason):
				t.Fatalf("reason %q is not one of the package's", pe.Reason)
			case pe.List == ListAllowOut && (pe.Index < 0 || pe.Index >= len(allow)),
				pe.List == ListDenyOut && (pe.Index < 0 || pe.Index >= len(deny)),
				pe.List == "" && pe.Index != 0,
				pe.List != "" && pe.List != ListAllowOut && pe.List != ListDenyOut:
				t.Fatalf("error %q names no entry of the lists", err)
			}
			return
		}
		for _, e := range allow {
			if _, isIP, _ := parseIPEntry(strings.TrimSpace(e)); !isIP {
				if h, _, _ := parseHost(strings.TrimSpace(e)); LocalhostName(h.Pattern) {
					t.Fatalf("allow_out took the localhost name %q", e)
				}
			}
		}
		q, err := Parse(p.AllowOut(), p.DenyOut())
		if err != nil {
			t.Fatalf("re-parse of %q / %q: %v", p.AllowOut(), p.DenyOut(), err)
		}
		if !q.Equal(p) {
			t.Fatalf("re-parse differs: %q vs %q", q.AllowOut(), p.AllowOut())
		}
		_ = p.DenyAll()
		_ = p.AllowsHost(a, 443)
		if addr, err := netip.ParseAddr(a); err == nil {
			_ = p.AllowsIP(addr)
		}
	})
}
