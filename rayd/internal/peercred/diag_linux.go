package peercred

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// The sock_diag path: one NETLINK_SOCK_DIAG request that names the client
// socket by its exact 4-tuple. The kernel answers with a hash lookup, where
// reading /proc/self/net/tcp walks every bucket of the established hash
// (262144 buckets on a 24 GB machine: about 8 ms per read).

// Sizes of the kernel's structures (include/uapi/linux/inet_diag.h).
const (
	diagSockIDLen = 48                     // struct inet_diag_sockid
	diagReqLen    = 8 + diagSockIDLen      // struct inet_diag_req_v2
	diagMsgLen    = 4 + diagSockIDLen + 20 // struct inet_diag_msg
	diagAllStates = 0xffffffff
	diagNoCookie  = 0xffffffff
)

// errDiagUnavailable means sock_diag cannot answer here (no netlink, an old
// kernel, a seccomp policy): the caller falls back to the socket tables.
var errDiagUnavailable = errors.New("peercred: sock_diag unavailable")

// diagSeq is the sequence number of every request: each lookup has its
// own socket.
const diagSeq = 1

// lookupDiag asks the kernel for the socket whose own address is remote and
// whose peer is local. It returns ErrNotFound, ErrOwnerGone, an Owner, or
// errDiagUnavailable.
func lookupDiag(local, remote netip.AddrPort) (Owner, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return Owner{}, errDiagUnavailable
	}
	defer unix.Close(fd)
	tv := unix.Timeval{Sec: 1}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return Owner{}, errDiagUnavailable
	}
	if err := unix.Sendto(fd, diagRequest(local, remote, diagSeq), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return Owner{}, errDiagUnavailable
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return Owner{}, errDiagUnavailable
		}
		if o, err, done := parseDiagReply(buf[:n], diagSeq, local, remote); done {
			return o, err
		}
	}
}

// diagRequest builds the netlink message of an exact-match request. The
// sockid is seen from the client socket: src is its address (remote), dst
// its peer (local).
func diagRequest(local, remote netip.AddrPort, seq uint32) []byte {
	msg := make([]byte, unix.NLMSG_HDRLEN+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(msg[0:], uint32(len(msg)))
	ne.PutUint16(msg[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(msg[6:], unix.NLM_F_REQUEST)
	ne.PutUint32(msg[8:], seq)
	req := msg[unix.NLMSG_HDRLEN:]
	family := byte(unix.AF_INET6)
	if remote.Addr().Is4() && local.Addr().Is4() {
		family = unix.AF_INET
	}
	req[0], req[1] = family, unix.IPPROTO_TCP
	ne.PutUint32(req[4:], diagAllStates)
	putSockID(req[8:], remote, local, family)
	ne.PutUint32(req[8+40:], diagNoCookie)
	ne.PutUint32(req[8+44:], diagNoCookie)
	return msg
}

func putSockID(id []byte, src, dst netip.AddrPort, family byte) {
	binary.BigEndian.PutUint16(id[0:], src.Port())
	binary.BigEndian.PutUint16(id[2:], dst.Port())
	putAddr(id[4:20], src.Addr(), family)
	putAddr(id[20:36], dst.Addr(), family)
}

func putAddr(dst []byte, a netip.Addr, family byte) {
	if family == unix.AF_INET {
		b := a.As4()
		copy(dst, b[:])
		return
	}
	b := a.As16()
	copy(dst, b[:])
}

// parseDiagReply reads one datagram of the answer to request seq. done is
// false when the datagram holds nothing for that request. A reply whose
// sockid is not the one asked for is ignored.
func parseDiagReply(b []byte, seq uint32, local, remote netip.AddrPort) (o Owner, err error, done bool) {
	ne := binary.NativeEndian
	for len(b) >= unix.NLMSG_HDRLEN {
		l := ne.Uint32(b[0:])
		typ := ne.Uint16(b[4:])
		mseq := ne.Uint32(b[8:])
		if l < unix.NLMSG_HDRLEN || uint64(l) > uint64(len(b)) {
			return Owner{}, fmt.Errorf("%w: truncated netlink message", errDiagUnavailable), true
		}
		body := b[unix.NLMSG_HDRLEN:l]
		next := (int(l) + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if next > len(b) {
			next = len(b)
		}
		b = b[next:]
		if mseq != seq {
			continue
		}
		switch typ {
		case unix.NLMSG_ERROR:
			if len(body) < 4 {
				return Owner{}, errDiagUnavailable, true
			}
			switch errno := -int32(ne.Uint32(body)); unix.Errno(errno) {
			case unix.ENOENT:
				return Owner{}, ErrNotFound, true
			default:
				return Owner{}, errDiagUnavailable, true
			}
		case unix.NLMSG_DONE:
			return Owner{}, ErrNotFound, true
		case unix.SOCK_DIAG_BY_FAMILY:
			if len(body) < diagMsgLen {
				return Owner{}, errDiagUnavailable, true
			}
			if !sameSockID(body[4:4+diagSockIDLen], body[0], remote, local) {
				continue
			}
			st := body[1]
			uid := ne.Uint32(body[4+diagSockIDLen+12:])
			inode := ne.Uint32(body[4+diagSockIDLen+16:])
			if st == StateTimeWait || inode == 0 {
				return Owner{}, ErrOwnerGone, true
			}
			return Owner{UID: uid, Inode: uint64(inode), State: st}, nil, true
		}
	}
	return Owner{}, nil, false
}

// sameSockID reports whether a reply's sockid is src<->dst.
func sameSockID(id []byte, family byte, src, dst netip.AddrPort) bool {
	if family != unix.AF_INET && family != unix.AF_INET6 {
		return false
	}
	want := make([]byte, diagSockIDLen)
	putSockID(want, src, dst, family)
	if family == unix.AF_INET {
		return string(id[0:4]) == string(want[0:4]) && string(id[4:8]) == string(want[4:8]) &&
			string(id[20:24]) == string(want[20:24])
	}
	return string(id[0:36]) == string(want[0:36])
}
