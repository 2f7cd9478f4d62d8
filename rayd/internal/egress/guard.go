package egress

import (
	"context"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/rayito-dev/rayito/rayd/internal/netpolicy"
)

var (
	prefixThisNet    = netip.MustParsePrefix("0.0.0.0/8")
	prefixReserved4  = netip.MustParsePrefix("240.0.0.0/4") // includes 255.255.255.255
	prefixV4Compat   = netip.MustParsePrefix("::/96")
	prefixV4Mapped   = netip.MustParsePrefix("::ffff:0:0/96")
	prefixV4Transl   = netip.MustParsePrefix("::ffff:0:0:0/96") // SIIT, RFC 2765
	prefixNAT64      = netip.MustParsePrefix("64:ff9b::/96")
	prefixNAT64Local = netip.MustParsePrefix("64:ff9b:1::/48") // RFC 8215
	prefix6to4       = netip.MustParsePrefix("2002::/16")
	prefixTeredo     = netip.MustParsePrefix("2001::/32")
	addrIMDS4        = netip.MustParseAddr("169.254.169.254")
	addrIMDS6        = netip.MustParseAddr("fd00:ec2::254")
)

// blockedAddress reports whether the proxy refuses to connect to a. The
// list, in order:
//
//   - invalid addresses and IPv6 addresses with a zone;
//   - every IPv6 form that embeds an IPv4 address (the caller unmaps
//     IPv4-mapped addresses first, so those are guarded as IPv4) — IPv4-mapped
//     (::ffff:0:0/96), IPv4-compatible (::/96, which also covers :: and
//     ::1), SIIT (::ffff:0:0:0/96), NAT64 (64:ff9b::/96, 64:ff9b:1::/48),
//     6to4 (2002::/16) and Teredo (2001::/32) — refused outright rather
//     than by their embedded address: a guest has no business reaching
//     an allowed name through one of them, and a gateway translating
//     them could reach any IPv4 address;
//   - unspecified, loopback (127.0.0.0/8, ::1), link-local unicast
//     (169.254.0.0/16, fe80::/10, which covers the IMDS address
//     169.254.169.254) and the IPv6 IMDS address fd00:ec2::254;
//   - multicast (224.0.0.0/4, ff00::/8), 0.0.0.0/8 and 240.0.0.0/4
//     (reserved, with the limited broadcast address 255.255.255.255);
//   - one of the guest's own addresses (local).
//
// Private ranges (10/8, 172.16/12, 192.168/16, fc00::/7) are not
// refused: a name the policy allows may legitimately live in the VPC.
func blockedAddress(a netip.Addr, local []netip.Addr) bool {
	if !a.IsValid() || a.Zone() != "" {
		return true
	}
	if a.Is6() {
		for _, p := range []netip.Prefix{prefixV4Compat, prefixV4Mapped, prefixV4Transl, prefixNAT64, prefixNAT64Local, prefix6to4, prefixTeredo} {
			if p.Contains(a) {
				return true
			}
		}
	}
	if a.IsUnspecified() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() ||
		a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast() {
		return true
	}
	if a == addrIMDS4 || a == addrIMDS6 {
		return true
	}
	if a.Is4() && (prefixThisNet.Contains(a) || prefixReserved4.Contains(a)) {
		return true
	}
	for _, l := range local {
		if l.Unmap().WithZone("") == a {
			return true
		}
	}
	return false
}

// interfaceAddrs is the default Options.LocalAddrs.
func interfaceAddrs() []netip.Addr {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}

// Blocked reports whether the proxy's guard refuses a (see [Proxy]), the
// guest's own interface addresses included: the secret gateway guards its
// upstreams with it.
func Blocked(a netip.Addr) bool { return blockedAddress(a.Unmap(), interfaceAddrs()) }

// BlockedUpstreamHost reports whether host, the host part of an operator
// SOCKS5 proxy's address, is refused before anything is resolved: an IP
// literal the guard refuses ([Blocked]: loopback, unspecified, link-local,
// the IMDS addresses, IPv4-mapped and other IPv4-embedding IPv6 forms,
// multicast, reserved, the guest's own addresses, any zone), "localhost"
// or a name under ".localhost", or a name that looks like a numeric IPv4
// form some resolvers take for an address ("127.1", "2130706433",
// "0x7f.1": a last label of digits only or starting with "0x"). A name
// that passes is resolved and guarded again at every dial.
func BlockedUpstreamHost(host string) bool {
	if a, err := netip.ParseAddr(host); err == nil {
		return Blocked(a) || a.Zone() != ""
	}
	return badUpstreamName(host)
}

// badUpstreamName reports whether name is a localhost name or looks like
// a numeric IPv4 form (see BlockedUpstreamHost).
func badUpstreamName(name string) bool {
	if netpolicy.LocalhostName(name) {
		return true
	}
	name = strings.TrimSuffix(name, ".")
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "" {
		return true
	}
	if len(last) >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X') {
		return true
	}
	return strings.Trim(last, "0123456789") == ""
}

// guardUpstream resolves the host of the upstream's address (an IP
// literal is taken as it is; a localhost name is never resolved) and
// guards every address like a destination's: it returns the addresses to
// dial, in order, or a reason class (upstream_blocked when any address is
// refused, dial_failed when the address is malformed or does not resolve).
func (p *Proxy) guardUpstream(ctx context.Context, address string) ([]netip.AddrPort, string) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, ReasonDialFailed
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || port == 0 {
		return nil, ReasonDialFailed
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if badUpstreamName(host) {
		return nil, ReasonUpstreamBlocked
	}
	guarded, ok, err := p.resolveGuarded(ctx, host, addrs)
	switch {
	case err != nil:
		return nil, ReasonDialFailed
	case !ok:
		return nil, ReasonUpstreamBlocked
	}
	out := make([]netip.AddrPort, 0, len(guarded))
	for _, a := range guarded {
		out = append(out, netip.AddrPortFrom(a, uint16(port)))
	}
	return out, ""
}
