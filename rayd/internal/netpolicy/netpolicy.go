// Package netpolicy parses and evaluates a sandbox's egress policy: the
// allow_out and deny_out lists of Sandbox.create (features.md, "Egress
// policy").
//
// The package is pure Go and touches no kernel state. It turns the user's
// lists into a canonical, validated [Policy] value that the kernel plumbing
// (package netcfg: nftables and policy routing) and rayd's egress proxy and
// DNS forwarder evaluate the same way.
//
// # Entries
//
// allow_out holds CIDRs ("10.0.0.0/8"), IP addresses (become /32 or /128),
// "0.0.0.0/0", "::/0" or the word ALL_TRAFFIC (both), exact host names
// ("api.example.com", optionally ":PORT") and wildcards ("*.example.com",
// optionally ":PORT"; a wildcard matches any name strictly below the
// suffix, never the suffix itself). deny_out holds CIDRs, IPs and
// ALL_TRAFFIC only. A host entry without a port allows ports 80 and 443; an
// explicit port allows that port only.
//
// # Semantics
//
// Allow beats deny, and an address that is neither allowed nor denied is
// allowed: deny_out closes, allow_out opens holes in what deny_out closes.
// Host rules are only enforced through rayd's proxy and DNS forwarder (a
// name is not visible to a packet filter), so for the direct path only the
// CIDRs count ([Policy.AllowsIP]). The cloud metadata addresses are not
// special here: netcfg rejects them for sandbox uids whatever the policy.
//
// # Validation
//
// At most 256 entries in total and 64 host entries. Names are lowercased,
// one trailing dot is stripped, and the result must be a DNS name of at
// least two labels (each 1-63 of [a-z0-9-], not starting or ending with
// '-', 253 bytes at most, last label not all digits so that nothing that
// looks like an IPv4 address is taken for a name); internationalized names
// must already be punycode ("xn--..."); the only wildcard is a leading
// "*."; "localhost" and every name under ".localhost" (and so the wildcard
// "*.localhost") are refused before anything is resolved: they name the
// sandbox's own loopback (RFC 6761), never a destination out. CIDRs are
// masked; IPv4-mapped IPv6 prefixes (::ffff:0:0/96 and below) are
// rejected because they are ambiguous between the two families; zones
// are rejected; duplicates are removed. Every problem is reported as an
// [*Error] wrapping [ErrInvalid], which names the list and the index of
// the entry ("allow_out[3]: ...") but never the entry itself (an entry may
// be an internal name its author would rather not see echoed in logs or
// errors); Parse never panics.
package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Limits on a policy.
const (
	MaxEntries     = 256 // allow_out and deny_out together
	MaxHostEntries = 64  // host entries of allow_out
)

// AllTraffic is the word for "0.0.0.0/0 and ::/0".
const AllTraffic = "ALL_TRAFFIC"

// ErrInvalid is wrapped by every error Parse returns.
var ErrInvalid = errors.New("invalid egress policy")

// The lists an [Error] names.
const (
	ListAllowOut = "allow_out"
	ListDenyOut  = "deny_out"
)

// Error describes an invalid entry by its list and index, or a limit on
// the whole policy (List empty). It never holds the entry: Reason is one
// of the package's fixed texts.
type Error struct {
	List   string // ListAllowOut, ListDenyOut, or "" for the whole policy
	Index  int    // the entry's index in List (0 when List is empty)
	Reason string
}

func (e *Error) Error() string { return "netpolicy: " + e.Where() }

// Where is the error without the package's prefix: "allow_out[3]: a host
// name under .localhost is not allowed", or the reason alone for a limit
// on the whole policy.
func (e *Error) Where() string {
	if e.List == "" {
		return e.Reason
	}
	return e.List + "[" + strconv.Itoa(e.Index) + "]: " + e.Reason
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

func invalid(list string, index int, reason string) *Error {
	return &Error{List: list, Index: index, Reason: reason}
}

// Reasons of an [Error] (besides reasonTooManyHosts and the limit on the
// whole policy).
const (
	reasonEmpty        = "empty entry"
	reasonCIDR         = "not a valid CIDR"
	reasonMappedPrefix = "IPv4-mapped IPv6 prefix (write the IPv4 form)"
	reasonZone         = "IP address with a zone"
	reasonMappedAddr   = "IPv4-mapped IPv6 address (write the IPv4 form)"
	reasonIP           = "not a valid IP address"
	reasonDenyHost     = "deny_out takes only CIDRs, IP addresses or " + AllTraffic
	reasonPort         = "port must be 1-65535"
	reasonEmptyName    = "empty host name"
	reasonLongName     = "host name longer than 253 bytes"
	reasonLocalhost    = "a host name under .localhost is not allowed"
	reasonOneLabel     = "host name needs at least two labels"
	reasonLabelLen     = "host name label must be 1-63 bytes"
	reasonLabelHyphen  = "host name label starts or ends with '-'"
	reasonWildcard     = "wildcard only as a leading \"*.\""
	reasonNonASCII     = "non-ASCII host name (use its punycode xn-- form)"
	reasonNameChar     = "invalid character in host name"
	reasonNumericLabel = "host name ends with a numeric label (IP addresses are written without a port)"
)

// reasonTooManyHosts is the reason of the first host entry past
// MaxHostEntries.
var reasonTooManyHosts = fmt.Sprintf("more than %d host entries", MaxHostEntries)

// LocalhostName reports whether name is "localhost" or a name under
// ".localhost" (any case, one trailing dot ignored): names that resolve to
// loopback (RFC 6761), which no policy may allow and rayd never dials for
// anyone but the sandbox's own code on its own loopback.
func LocalhostName(name string) bool {
	name = strings.TrimSuffix(name, ".")
	const l = "localhost"
	if len(name) < len(l) || !strings.EqualFold(name[len(name)-len(l):], l) {
		return false
	}
	return len(name) == len(l) || name[len(name)-len(l)-1] == '.'
}

// HostRule allows a host name (Wildcard false) or any name strictly below
// Pattern (Wildcard true) on Ports (sorted, no duplicates).
type HostRule struct {
	Pattern  string // lowercase, no trailing dot, no "*." prefix
	Wildcard bool
	Ports    []uint16
}

func (h HostRule) equal(o HostRule) bool {
	return h.Pattern == o.Pattern && h.Wildcard == o.Wildcard && slices.Equal(h.Ports, o.Ports)
}

// matches reports whether the normalized name matches h (ports aside).
func (h HostRule) matches(name string) bool {
	if h.Wildcard {
		return len(name) > len(h.Pattern)+1 && strings.HasSuffix(name, h.Pattern) && name[len(name)-len(h.Pattern)-1] == '.'
	}
	return name == h.Pattern
}

// Policy is a validated egress policy. The zero value is the unrestricted
// policy. A Policy is immutable: its accessors return copies.
type Policy struct {
	allow     []netip.Prefix // sorted, deduplicated, masked
	deny      []netip.Prefix
	hosts     []HostRule // sorted by (Pattern, Wildcard)
	intercept []uint16   // sorted, deduplicated: WithIntercept
}

// WithIntercept returns p with TCP to ports always sent to rayd's proxy
// (whatever p allows directly), which hands the connections to the
// destinations the secret placeholders name to their interceptor and
// treats every other one as the direct path would. It is not part of
// what the user asked for (AllowOut, DenyOut): rayd adds it.
func (p Policy) WithIntercept(ports []uint16) Policy {
	q := p
	q.intercept = slices.Compact(slices.Sorted(slices.Values(ports)))
	if len(q.intercept) == 0 {
		q.intercept = nil
	}
	return q
}

// InterceptPorts returns the ports of WithIntercept, sorted.
func (p Policy) InterceptPorts() []uint16 { return slices.Clone(p.intercept) }

var (
	all4 = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	all6 = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
)

// Parse validates allow_out and deny_out and returns their canonical policy.
func Parse(allowOut, denyOut []string) (Policy, error) {
	if n := len(allowOut) + len(denyOut); n > MaxEntries {
		return Policy{}, invalid("", 0, fmt.Sprintf("%d entries, at most %d allowed", n, MaxEntries))
	}
	var p Policy
	nhosts := 0
	type hostKey struct {
		pattern  string
		wildcard bool
	}
	hosts := map[hostKey]map[uint16]bool{}
	for i, raw := range allowOut {
		e := strings.TrimSpace(raw)
		pfx, isIP, reason := parseIPEntry(e)
		if reason != "" {
			return Policy{}, invalid(ListAllowOut, i, reason)
		}
		if isIP {
			p.allow = append(p.allow, pfx...)
			continue
		}
		nhosts++
		if nhosts > MaxHostEntries {
			return Policy{}, invalid(ListAllowOut, i, reasonTooManyHosts)
		}
		h, ports, reason := parseHost(e)
		if reason != "" {
			return Policy{}, invalid(ListAllowOut, i, reason)
		}
		k := hostKey{h.Pattern, h.Wildcard}
		if hosts[k] == nil {
			hosts[k] = map[uint16]bool{}
		}
		for _, port := range ports {
			hosts[k][port] = true
		}
	}
	for i, raw := range denyOut {
		e := strings.TrimSpace(raw)
		pfx, isIP, reason := parseIPEntry(e)
		if reason != "" {
			return Policy{}, invalid(ListDenyOut, i, reason)
		}
		if !isIP {
			return Policy{}, invalid(ListDenyOut, i, reasonDenyHost)
		}
		p.deny = append(p.deny, pfx...)
	}
	p.allow = canonPrefixes(p.allow)
	p.deny = canonPrefixes(p.deny)
	for k, ports := range hosts {
		h := HostRule{Pattern: k.pattern, Wildcard: k.wildcard}
		for port := range ports {
			h.Ports = append(h.Ports, port)
		}
		slices.Sort(h.Ports)
		p.hosts = append(p.hosts, h)
	}
	slices.SortFunc(p.hosts, func(a, b HostRule) int {
		if c := strings.Compare(a.Pattern, b.Pattern); c != 0 {
			return c
		}
		switch {
		case a.Wildcard == b.Wildcard:
			return 0
		case !a.Wildcard:
			return -1
		}
		return 1
	})
	return p, nil
}

// parseIPEntry parses e as ALL_TRAFFIC, a CIDR or an IP address. isIP is
// false (and reason empty) when e is none of them and may be a host
// entry; reason is the problem otherwise.
func parseIPEntry(e string) (pfx []netip.Prefix, isIP bool, reason string) {
	if e == "" {
		return nil, false, reasonEmpty
	}
	if strings.EqualFold(e, AllTraffic) {
		return []netip.Prefix{all4, all6}, true, ""
	}
	if strings.Contains(e, "/") {
		p, perr := netip.ParsePrefix(e)
		if perr != nil {
			return nil, false, reasonCIDR
		}
		p = p.Masked()
		if p.Addr().Is4In6() {
			return nil, false, reasonMappedPrefix
		}
		return []netip.Prefix{p}, true, ""
	}
	if a, aerr := netip.ParseAddr(e); aerr == nil {
		if a.Zone() != "" {
			return nil, false, reasonZone
		}
		if a.Is4In6() {
			return nil, false, reasonMappedAddr
		}
		return []netip.Prefix{netip.PrefixFrom(a, a.BitLen())}, true, ""
	}
	if strings.Count(e, ":") > 1 || strings.ContainsAny(e, "[]%") {
		return nil, false, reasonIP
	}
	return nil, false, ""
}

var defaultPorts = []uint16{80, 443}

// parseHost parses "name", "name:port", "*.suffix" or "*.suffix:port";
// reason is the problem, empty when there is none.
func parseHost(e string) (HostRule, []uint16, string) {
	name, ports := e, defaultPorts
	if i := strings.LastIndexByte(e, ':'); i >= 0 {
		n, err := strconv.ParseUint(e[i+1:], 10, 16)
		if err != nil || n == 0 || !isDigits(e[i+1:]) {
			return HostRule{}, nil, reasonPort
		}
		name, ports = e[:i], []uint16{uint16(n)}
	}
	var h HostRule
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		h.Wildcard = true
		name = rest
	}
	norm, reason := normalizeName(name)
	if reason != "" {
		return HostRule{}, nil, reason
	}
	h.Pattern = norm
	return h, ports, ""
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// normalizeName lowercases name, strips one trailing dot and validates it;
// reason is empty when the name is valid.
func normalizeName(name string) (norm, reason string) {
	name = strings.TrimSuffix(name, ".")
	if name == "" {
		return "", reasonEmptyName
	}
	if len(name) > 253 {
		return "", reasonLongName
	}
	if LocalhostName(name) {
		return "", reasonLocalhost
	}
	b := []byte(name)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	name = string(b)
	labels := strings.Split(name, ".")
	if len(labels) < 2 {
		return "", reasonOneLabel
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return "", reasonLabelLen
		}
		if l[0] == '-' || l[len(l)-1] == '-' {
			return "", reasonLabelHyphen
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			switch {
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-':
			case c == '*':
				return "", reasonWildcard
			case c >= 0x80:
				return "", reasonNonASCII
			default:
				return "", reasonNameChar
			}
		}
	}
	if isDigits(labels[len(labels)-1]) {
		return "", reasonNumericLabel
	}
	return name, ""
}

// canonPrefixes sorts and deduplicates (exact duplicates only: overlapping
// prefixes are kept, as the user wrote them).
func canonPrefixes(ps []netip.Prefix) []netip.Prefix {
	slices.SortFunc(ps, comparePrefix)
	return slices.Compact(ps)
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// Equal reports whether p and o are the same policy.
func (p Policy) Equal(o Policy) bool {
	return slices.Equal(p.allow, o.allow) && slices.Equal(p.deny, o.deny) &&
		slices.EqualFunc(p.hosts, o.hosts, HostRule.equal) && slices.Equal(p.intercept, o.intercept)
}

// AllowCIDRs returns the allowed prefixes (IPv4 and IPv6, sorted).
func (p Policy) AllowCIDRs() []netip.Prefix { return slices.Clone(p.allow) }

// DenyCIDRs returns the denied prefixes (IPv4 and IPv6, sorted).
func (p Policy) DenyCIDRs() []netip.Prefix { return slices.Clone(p.deny) }

// Hosts returns the host rules, sorted by pattern (exact before wildcard).
func (p Policy) Hosts() []HostRule {
	out := make([]HostRule, len(p.hosts))
	for i, h := range p.hosts {
		h.Ports = slices.Clone(h.Ports)
		out[i] = h
	}
	return out
}

// Unrestricted reports whether the policy has no entries at all.
func (p Policy) Unrestricted() bool {
	return len(p.allow) == 0 && len(p.deny) == 0 && len(p.hosts) == 0
}

// DenyAll reports whether deny_out covers all of 0.0.0.0/0 and ::/0 and no
// CIDR is allowed. Host rules may still be allowed (through the proxy).
func (p Policy) DenyAll() bool {
	return len(p.allow) == 0 && covers(p.deny, true) && covers(p.deny, false)
}

// covers reports whether the union of ps covers the whole IPv4 (v4) or
// IPv6 address space.
func covers(ps []netip.Prefix, v4 bool) bool {
	next := netip.IPv6Unspecified()
	if v4 {
		next = netip.IPv4Unspecified()
	}
	// ps is sorted by first address, so one pass finds any gap.
	for _, pfx := range ps {
		if pfx.Addr().Is4() != v4 {
			continue
		}
		if next.Less(pfx.Addr()) {
			return false
		}
		last := lastAddr(pfx)
		if last.Less(next) {
			continue
		}
		n := last.Next()
		if !n.IsValid() {
			return true
		}
		next = n
	}
	return false
}

// lastAddr returns the last address of p (p's address with all host bits
// set).
func lastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	if p.Addr().Is4() {
		b := p.Addr().As4()
		for i := p.Bits(); i < 32; i++ {
			b[i/8] |= 0x80 >> (i % 8)
		}
		return netip.AddrFrom4(b)
	}
	b := p.Addr().As16()
	for i := p.Bits(); i < 128; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	return netip.AddrFrom16(b)
}

// AllowsIP reports whether a direct connection to addr is allowed: allow
// beats deny, and an address not denied is allowed. IPv4-mapped IPv6
// addresses are matched as IPv4; an invalid address is not allowed.
func (p Policy) AllowsIP(addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	addr = addr.Unmap().WithZone("")
	for _, pfx := range p.allow {
		if pfx.Contains(addr) {
			return true
		}
	}
	for _, pfx := range p.deny {
		if pfx.Contains(addr) {
			return false
		}
	}
	return true
}

// AllowsHost reports whether a host rule allows name on port. The name is
// matched case-insensitively, with one trailing dot ignored; anything that
// is not a valid host name (an IP literal, a wildcard) is not allowed.
func (p Policy) AllowsHost(name string, port uint16) bool {
	norm, reason := normalizeName(name)
	if reason != "" {
		return false
	}
	for _, h := range p.hosts {
		if h.matches(norm) && slices.Contains(h.Ports, port) {
			return true
		}
	}
	return false
}

// HostPorts returns the union of the ports of the host rules, sorted.
func (p Policy) HostPorts() []uint16 {
	var out []uint16
	for _, h := range p.hosts {
		out = append(out, h.Ports...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// AllowOut returns allow_out in canonical form, for display: ALL_TRAFFIC
// first when both 0.0.0.0/0 and ::/0 are allowed, then the prefixes in
// order, then the host entries. Parsing the result gives an Equal policy,
// and it never has more entries than the lists the policy came from.
func (p Policy) AllowOut() []string {
	out := prefixStrings(p.allow)
	for _, h := range p.hosts {
		name := h.Pattern
		if h.Wildcard {
			name = "*." + name
		}
		ports := h.Ports
		if slices.Contains(ports, 80) && slices.Contains(ports, 443) {
			out = append(out, name)
			ports = slices.DeleteFunc(slices.Clone(ports), func(x uint16) bool { return x == 80 || x == 443 })
		}
		for _, port := range ports {
			out = append(out, name+":"+strconv.Itoa(int(port)))
		}
	}
	return out
}

// DenyOut returns deny_out in canonical form, for display (as AllowOut).
func (p Policy) DenyOut() []string { return prefixStrings(p.deny) }

func prefixStrings(ps []netip.Prefix) []string {
	var out []string
	if slices.Contains(ps, all4) && slices.Contains(ps, all6) {
		out = append(out, AllTraffic)
	}
	for _, pfx := range ps {
		if len(out) > 0 && out[0] == AllTraffic && (pfx == all4 || pfx == all6) {
			continue
		}
		if pfx.IsSingleIP() {
			out = append(out, pfx.Addr().String())
		} else {
			out = append(out, pfx.String())
		}
	}
	return out
}
