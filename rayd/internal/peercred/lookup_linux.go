package peercred

import (
	"errors"
	"io/fs"
	"net"
	"net/netip"
	"os"
)

// Socket tables of this process's network namespace.
var (
	tcp4Table = "/proc/self/net/tcp"
	tcp6Table = "/proc/self/net/tcp6"
)

// LookupTCP finds the owner of the client end of a TCP connection that this
// process accepted: local is the connection's local address (ours) and remote
// its remote address (the client's), as returned by net.Conn's LocalAddr and
// RemoteAddr.
//
// It asks the kernel through a sock_diag netlink request for the socket of
// this process's network namespace whose own address is remote and whose
// peer is local (a hash lookup). Where sock_diag is not available it
// searches the socket tables instead (/proc/self/net/tcp, then
// /proc/self/net/tcp6 for IPv4 clients, and only /proc/self/net/tcp6 for
// IPv6 clients), which costs a walk of the whole established hash. IPv4 addresses match their
// IPv4-mapped IPv6 forms, so an IPv4 client of a dual-stack listener is found
// whichever table its socket is in.
//
// It returns the owner of the first live match. When the only matches are in
// TIME_WAIT or have no inode (the client has closed its socket), it returns
// [ErrOwnerGone]; when nothing matches, [ErrNotFound]. It never reports the
// uid 0 that the kernel prints for ownerless rows. Errors do not contain the
// addresses.
//
// The answer is only as fresh as the moment of the call: call it when the
// connection is accepted, before reading from it.
func LookupTCP(local, remote net.Addr) (Owner, error) {
	l, err := addrPort(local)
	if err != nil {
		return Owner{}, err
	}
	r, err := addrPort(remote)
	if err != nil {
		return Owner{}, err
	}
	if o, err := lookupDiag(l, r); !errors.Is(err, errDiagUnavailable) &&
		!(errors.Is(err, ErrNotFound) && r.Addr().IsLinkLocalUnicast()) {
		return o, err
	}
	return lookupTables(l, r)
}

// lookupTables is LookupTCP through /proc/self/net/tcp{,6}: the fallback
// when sock_diag cannot answer, and for link-local IPv6 clients (whose
// exact lookup would need the interface).
func lookupTables(l, r netip.AddrPort) (Owner, error) {
	if r.Addr().Is4() {
		// An IPv4 client socket is in tcp, unless it is an IPv6 socket
		// talking to an IPv4-mapped address; tcp6 may be absent when IPv6 is
		// disabled.
		return lookup(l, r, table{tcp4Table, true}, table{tcp6Table, false})
	}
	return lookup(l, r, table{tcp6Table, true})
}

type table struct {
	path     string
	required bool // a missing file is an error rather than an empty table
}

func lookup(local, remote netip.AddrPort, tables ...table) (Owner, error) {
	gone := false
	for _, t := range tables {
		f, err := os.Open(t.path)
		if err != nil {
			if !t.required && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return Owner{}, err
		}
		o, found, g, err := search(f, local, remote)
		f.Close()
		if err != nil {
			return Owner{}, err
		}
		if found {
			return o, nil
		}
		gone = gone || g
	}
	if gone {
		return Owner{}, ErrOwnerGone
	}
	return Owner{}, ErrNotFound
}

// search scans one table for the client end of the connection local<-remote:
// a row whose own address is remote and whose peer is local. found reports a
// live match; gone reports that only ownerless matches were seen.
func search(f *os.File, local, remote netip.AddrPort) (o Owner, found, gone bool, err error) {
	err = ParseTable(f, func(row Row) bool {
		if canonical(row.LocalIP) != remote || canonical(row.RemoteIP) != local {
			return true
		}
		if row.State == StateTimeWait || row.Inode == 0 {
			// The kernel reports uid 0 for these: not an owner. Keep
			// looking in case the 4-tuple was reused by a live socket.
			gone = true
			return true
		}
		o = Owner{UID: row.UID, Inode: row.Inode, State: row.State}
		found = true
		return false
	})
	return o, found, gone, err
}
