package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"strconv"
)

var (
	metadataV4 = netip.MustParseAddr("169.254.169.254")
	metadataV6 = netip.MustParseAddr("fd00:ec2::254")
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
)

// DefaultBlocked is the default address guard: it refuses loopback,
// link-local (unicast and multicast, v4 and v6), unspecified and multicast
// addresses and the cloud metadata addresses 169.254.169.254 and
// fd00:ec2::254, including IPv4-mapped, IPv4-compatible, NAT64 and 6to4
// embeddings of blocked IPv4 addresses.
func DefaultBlocked(a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	a = a.WithZone("").Unmap()
	if blockedPlain(a) {
		return true
	}
	if a.Is6() {
		b := a.As16()
		var v4 netip.Addr
		switch {
		case isZero(b[:12]): // IPv4-compatible ::a.b.c.d
			v4 = netip.AddrFrom4([4]byte(b[12:16]))
		case nat64.Contains(a) || nat64Local.Contains(a):
			v4 = netip.AddrFrom4([4]byte(b[12:16]))
		case b[0] == 0x20 && b[1] == 0x02: // 6to4 2002:a.b.c.d::/48
			v4 = netip.AddrFrom4([4]byte(b[2:6]))
		}
		if v4.IsValid() && blockedPlain(v4) {
			return true
		}
	}
	return false
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func blockedPlain(a netip.Addr) bool {
	return a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsUnspecified() || a.IsMulticast() ||
		a == metadataV4 || a == metadataV6 ||
		(a.Is4() && a.As4()[0] == 0) // 0.0.0.0/8 ("this network")
}

// errBlockedAddress means a resolved upstream address was refused by the
// address guard.
var errBlockedAddress = errors.New("gateway: upstream address refused")

// errNoAddress means the upstream host resolved to nothing.
var errNoAddress = errors.New("gateway: upstream has no address")

// connectTimeoutError is returned when dial + TLS handshake exceed the
// connect timeout.
type connectTimeoutError struct{}

func (connectTimeoutError) Error() string   { return "gateway: upstream connect timeout" }
func (connectTimeoutError) Timeout() bool   { return true }
func (connectTimeoutError) Temporary() bool { return true }

// dialTLS resolves host, guards every address, dials a guarded address and
// performs the TLS handshake, all within the connect timeout.
func (g *Gateway) dialTLS(ctx context.Context, host string, port uint16) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, g.opts.ConnectTimeout)
	defer cancel()
	conn, err := g.dialGuarded(ctx, host, port)
	if err != nil {
		return nil, timeoutOr(ctx, err)
	}
	tc := tls.Client(conn, &tls.Config{
		ServerName: host,
		RootCAs:    g.opts.RootCAs,
		NextProtos: []string{"http/1.1"},
		MinVersion: tls.VersionTLS12,
		Time:       g.opts.Now,
	})
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, timeoutOr(ctx, err)
	}
	return tc, nil
}

func timeoutOr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return connectTimeoutError{}
	}
	return err
}

func (g *Gateway) dialGuarded(ctx context.Context, host string, port uint16) (net.Conn, error) {
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = g.opts.Resolve(ctx, host)
		if err != nil {
			return nil, err
		}
	}
	if len(addrs) == 0 {
		return nil, errNoAddress
	}
	for _, a := range addrs {
		if g.opts.Blocked(a) {
			return nil, errBlockedAddress
		}
	}
	var firstErr error
	for _, a := range addrs {
		c, err := g.opts.Dial(ctx, "tcp", net.JoinHostPort(a.Unmap().WithZone("").String(), strconv.Itoa(int(port))))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}

func defaultResolve(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

func defaultDial(ctx context.Context, network, address string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, network, address)
}
