package events

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// MaxWebhookURLLen is the longest webhook URL CheckWebhookURL accepts.
const MaxWebhookURLLen = 2048

var (
	// ErrInvalidURL reports a webhook URL of the wrong shape: not https,
	// with user info or a fragment, without a host, malformed, too long.
	ErrInvalidURL = errors.New("events: invalid webhook URL")

	// ErrBlockedURL reports a webhook URL whose host is an address or a
	// name that only reaches this machine or a private network.
	ErrBlockedURL = errors.New("events: webhook URL targets a blocked address")
)

// blockedV4 are the IPv4 ranges no webhook may reach: not unicast on the
// public internet.
var blockedV4 = prefixes(
	"0.0.0.0/8",       // "this network"
	"10.0.0.0/8",      // RFC 1918
	"100.64.0.0/10",   // CGNAT, RFC 6598
	"127.0.0.0/8",     // loopback
	"169.254.0.0/16",  // link-local (cloud metadata services)
	"172.16.0.0/12",   // RFC 1918
	"192.0.0.0/24",    // IETF protocol assignments
	"192.0.2.0/24",    // TEST-NET-1 (documentation)
	"192.88.99.0/24",  // 6to4 relay anycast (deprecated)
	"192.168.0.0/16",  // RFC 1918
	"198.18.0.0/15",   // benchmarking
	"198.51.100.0/24", // TEST-NET-2
	"203.0.113.0/24",  // TEST-NET-3
	"224.0.0.0/4",     // multicast
	"240.0.0.0/4",     // reserved, and 255.255.255.255 broadcast
)

// blockedV6 are the IPv6 ranges blocked whole. The forms that embed an
// IPv4 address (mapped, translated, NAT64, 6to4) are checked by what they
// embed, in BlockedAddr.
var blockedV6 = prefixes(
	"::/96",          // unspecified, loopback and the deprecated IPv4-compatible form
	"100::/64",       // discard-only
	"64:ff9b:1::/48", // local-use NAT64 (RFC 8215)
	"2001::/32",      // Teredo (embeds obfuscated IPv4 addresses)
	"2001:2::/48",    // benchmarking
	"2001:db8::/32",  // documentation
	"fc00::/7",       // unique local
	"fe80::/10",      // link-local
	"fec0::/10",      // site-local (deprecated)
	"ff00::/8",       // multicast
)

var (
	mapped     = netip.MustParsePrefix("::ffff:0:0/96")   // IPv4-mapped
	translated = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated (SIIT)
	nat64      = netip.MustParsePrefix("64:ff9b::/96")    // well-known NAT64
	sixToFour  = netip.MustParsePrefix("2002::/16")       // 6to4
)

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// BlockedAddr reports whether a webhook delivery must not connect to a:
// loopback, unspecified, RFC 1918, link-local, CGNAT, multicast, broadcast,
// reserved (0/8, 240/4), benchmarking (198.18/15), documentation and IETF
// ranges, their IPv6 equivalents (::1, ::, fc00::/7, fe80::/10, fec0::/10,
// ff00::/8, 100::/64, 2001:db8::/32, 2001:2::/48), Teredo (2001::/32), the
// deprecated IPv4-compatible ::/96 and local-use NAT64 64:ff9b:1::/48 whole,
// and the IPv4-mapped (::ffff:0:0/96), IPv4-translated (::ffff:0:0:0/96),
// NAT64 (64:ff9b::/96) and 6to4 (2002::/16) forms of a blocked IPv4
// address. The zone of a scoped address is ignored; the zero Addr is
// blocked.
func BlockedAddr(a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	a = a.WithZone("")
	if a.Is4() {
		return inAny(a, blockedV4)
	}
	if mapped.Contains(a) || translated.Contains(a) || nat64.Contains(a) {
		b := a.As16()
		return inAny(netip.AddrFrom4([4]byte(b[12:16])), blockedV4)
	}
	if sixToFour.Contains(a) {
		b := a.As16()
		return inAny(netip.AddrFrom4([4]byte(b[2:6])), blockedV4)
	}
	return inAny(a, blockedV6)
}

func inAny(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// blockedSuffixes are name suffixes that resolve only locally by design:
// localhost (RFC 6761), mDNS .local (RFC 6762), .internal (reserved for
// private use by ICANN), .localdomain and .home.arpa (RFC 8375).
var blockedSuffixes = []string{"localhost", "local", "internal", "localdomain", "home.arpa"}

// CheckWebhookURL checks a webhook URL at registration and returns it
// parsed, its host lower-cased and a numeric IPv4 host in dotted-quad form
// (so the deliverer dials what was checked). It requires https, a host, no
// user info, no fragment, at most MaxWebhookURLLen bytes and a port, when
// given, in 1..65535; the host must be a literal address that BlockedAddr
// allows, or a DNS name of at least two labels ([a-z0-9-], IDNs in
// punycode) outside localhost, *.localhost, *.local, *.internal,
// *.localdomain and *.home.arpa. A host whose last label is numeric is an
// IPv4 address in any spelling a resolver accepts (2130706433, 0x7f.1,
// 0177.0.0.1, 127.1; WHATWG URL's IPv4 parser) and is checked as such, or
// refused when it is not a valid one. Errors wrap ErrInvalidURL or
// ErrBlockedURL and never quote the URL.
//
// A name is checked again where it matters: the deliverer resolves it and
// refuses every address BlockedAddr blocks.
func CheckWebhookURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, badURL("empty")
	}
	if len(raw) > MaxWebhookURLLen {
		return nil, badURL("longer than 2048 bytes")
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] <= 0x20 || raw[i] >= 0x7f || raw[i] == '\\' {
			return nil, badURL("contains a space, a control, a backslash or a non-ASCII character")
		}
	}
	if strings.Contains(raw, "#") {
		return nil, badURL("has a fragment")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, badURL("does not parse")
	}
	if u.Scheme != "https" {
		return nil, badURL("scheme must be https")
	}
	if u.Opaque != "" || !strings.HasPrefix(raw[len("https:"):], "//") {
		return nil, badURL("must be https://host/...")
	}
	if u.User != nil {
		return nil, badURL("has user info")
	}
	if strings.HasSuffix(u.Host, ":") {
		return nil, badURL("empty port")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || p[0] == '0' {
			return nil, badURL("port must be 1 to 65535")
		}
	}
	host := u.Hostname()
	if host == "" {
		return nil, badURL("no host")
	}
	if strings.HasPrefix(u.Host, "[") {
		if strings.Contains(host, "%") {
			return nil, badURL("scoped IPv6 address")
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return nil, badURL("bad IPv6 address")
		}
		if BlockedAddr(a) {
			return nil, blocked("blocked address")
		}
		return u, nil
	}
	host = strings.ToLower(host)
	if a, ok, err := parseIPv4Host(host); err != nil {
		return nil, err
	} else if ok {
		if BlockedAddr(a) {
			return nil, blocked("blocked address")
		}
		setHost(u, a.String())
		return u, nil
	}
	if err := checkName(host); err != nil {
		return nil, err
	}
	setHost(u, host)
	return u, nil
}

func setHost(u *url.URL, host string) {
	if p := u.Port(); p != "" {
		u.Host = host + ":" + p
	} else {
		u.Host = host
	}
}

func badURL(msg string) error  { return fmt.Errorf("%w: %s", ErrInvalidURL, msg) }
func blocked(msg string) error { return fmt.Errorf("%w: %s", ErrBlockedURL, msg) }

// checkName checks a lower-case DNS name (one trailing dot allowed).
func checkName(host string) error {
	name := strings.TrimSuffix(host, ".")
	if len(name) == 0 || len(name) > 253 {
		return badURL("bad host name")
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return badURL("bad host name")
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return badURL("bad host name")
			}
		}
	}
	for _, s := range blockedSuffixes {
		if name == s || strings.HasSuffix(name, "."+s) {
			return blocked("local-only host name")
		}
	}
	if len(labels) < 2 {
		return badURL("host name must have at least two labels")
	}
	return nil
}

// parseIPv4Host applies WHATWG URL's rule: a host whose last label (after
// one trailing dot) is a number (decimal digits, or 0x with hex digits) is
// an IPv4 address, each label decimal, octal (leading 0) or hex (0x), the
// last one filling the remaining bytes (inet_aton). ok is false when the
// host is not of that form; err (ErrInvalidURL) when it is but does not
// parse.
func parseIPv4Host(host string) (a netip.Addr, ok bool, err error) {
	h := strings.TrimSuffix(host, ".")
	parts := strings.Split(h, ".")
	last := parts[len(parts)-1]
	if !isNumberLabel(last) {
		return netip.Addr{}, false, nil
	}
	if len(parts) > 4 {
		return netip.Addr{}, false, badURL("bad IPv4 address")
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false, badURL("bad IPv4 address")
		}
		nums[i] = n
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false, badURL("bad IPv4 address")
		}
	}
	lastN := nums[len(nums)-1]
	if lastN >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false, badURL("bad IPv4 address")
	}
	v := lastN
	for i, n := range nums[:len(nums)-1] {
		v += n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true, nil
}

func isNumberLabel(s string) bool {
	if s == "" {
		return false
	}
	if allDigits(s, 10) {
		return true
	}
	return (strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X")) && allDigits(s[2:], 16)
}

func allDigits(s string, base int) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9' && (base > 8 || c <= '7'):
		case base == 16 && ('a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
		default:
			return false
		}
	}
	return true
}

// parseIPv4Number parses one label: 0x… hex ("0x" alone is 0), 0… octal,
// else decimal; values beyond 32 bits fail.
func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
		s, base = s[2:], 16
		if s == "" {
			return 0, true
		}
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	if !allDigits(s, base) {
		return 0, false
	}
	s = strings.TrimLeft(s, "0")
	if s == "" {
		return 0, true
	}
	if len(s) > 11 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 64)
	if err != nil || n > 0xffffffff {
		return 0, false
	}
	return n, true
}
