//go:build !linux

package peercred

import "net"

// LookupTCP finds the owner of the client end of a TCP connection that this
// process accepted. It is only implemented on Linux; here it always returns
// [ErrUnsupported].
func LookupTCP(local, remote net.Addr) (Owner, error) {
	return Owner{}, ErrUnsupported
}
