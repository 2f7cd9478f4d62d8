//go:build !linux

package hooks

import (
	"errors"
	"net"
)

// unixPeerCred cannot tell who a Unix client is outside Linux: its callers
// are unknown.
func unixPeerCred(*net.UnixConn) (int32, uint32, error) {
	return 0, 0, errors.New("hooks: SO_PEERCRED is Linux only")
}
