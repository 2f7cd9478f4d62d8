//go:build !linux

package egress

import (
	"errors"
	"net"
	"net/netip"
)

// originalDst is the default Options.OriginalDst; outside Linux no
// connection is ever considered redirected.
func originalDst(net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.New("egress: SO_ORIGINAL_DST needs Linux")
}
