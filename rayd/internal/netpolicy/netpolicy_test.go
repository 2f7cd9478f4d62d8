package netpolicy

import (
	"errors"
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
	_, err := Parse([]string{strings.Repeat("z", 300)}, nil)
	var pe *Error
	if !errors.As(err, &pe) || len(pe.Entry) != 100 {
		t.Errorf("entry not truncated: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "ALL_TRAFFIC", "::/0", "api.example.com", "*.example.com:8443",
		"1.2.3.4", "::ffff:1.2.3.4", "example.com.", "a.b:1", "2001:db8::/32"} {
		f.Add(s, s+"\n0.0.0.0/0")
	}
	f.Fuzz(func(t *testing.T, a, d string) {
		p, err := Parse(strings.Split(a, "\n"), strings.Split(d, "\n"))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
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
