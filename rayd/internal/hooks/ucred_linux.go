package hooks

import (
	"net"

	"golang.org/x/sys/unix"
)

// unixPeerCred reads the SO_PEERCRED of c's client: its pid and uid when it
// connected, translated into rayd's pid and user namespaces (pid 0: the
// client is outside rayd's pid namespace).
func unixPeerCred(c *net.UnixConn) (int32, uint32, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if cerr != nil {
		return 0, 0, cerr
	}
	return cred.Pid, cred.Uid, nil
}
