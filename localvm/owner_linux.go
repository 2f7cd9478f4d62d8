package localvm

import (
	"net"
	"syscall"
)

// unixPeerUID is SO_PEERCRED's uid.
func unixPeerUID(c *net.UnixConn) (uint32, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var (
		uid  uint32
		cerr error
	)
	if err := rc.Control(func(fd uintptr) {
		var cred *syscall.Ucred
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if cerr == nil {
			uid = cred.Uid
		}
	}); err != nil {
		return 0, err
	}
	return uid, cerr
}
