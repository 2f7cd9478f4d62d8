//go:build linux

package egress

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ip6tSOOriginalDst is IP6T_SO_ORIGINAL_DST from
// linux/netfilter_ipv6/ip6_tables.h (x/sys/unix does not define it).
const ip6tSOOriginalDst = 80

// originalDst is the default Options.OriginalDst: it asks conntrack for
// the destination a connection had before an nftables/iptables REDIRECT
// or DNAT (SO_ORIGINAL_DST for IPv4, IP6T_SO_ORIGINAL_DST for IPv6). A
// connection that was not NATed fails (ENOENT) or reports the listener's
// own address.
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, errors.New("egress: not a TCP connection")
	}
	la, ok := tc.LocalAddr().(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, errors.New("egress: no local address")
	}
	v4 := la.IP.To4() != nil
	rc, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var dst netip.AddrPort
	var serr error
	err = rc.Control(func(fd uintptr) {
		if v4 {
			// struct sockaddr_in (16 bytes) fits in IPv6Mreq (20).
			m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
			if err != nil {
				serr = err
				return
			}
			port := binary.BigEndian.Uint16(m.Multiaddr[2:4])
			dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(m.Multiaddr[4:8])), port)
			return
		}
		// struct sockaddr_in6 (28 bytes) fits in IPv6MTUInfo (32).
		m, err := unix.GetsockoptIPv6MTUInfo(int(fd), unix.IPPROTO_IPV6, ip6tSOOriginalDst)
		if err != nil {
			serr = err
			return
		}
		p := (*[2]byte)(unsafe.Pointer(&m.Addr.Port))
		dst = netip.AddrPortFrom(netip.AddrFrom16(m.Addr.Addr), binary.BigEndian.Uint16(p[:]))
	})
	if err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, serr
	}
	return dst, nil
}
