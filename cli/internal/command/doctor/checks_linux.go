//go:build linux

package doctor

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// writable reports whether this user may write p (access(2) W_OK).
func writable(p string) bool { return syscall.Access(p, 0x2) == nil }

func fsType(p string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(p, &st); err != nil {
		return 0, err
	}
	return int64(st.Type), nil
}

// runInUserNS runs p in a new user namespace whose root is this user.
func runInUserNS(ctx context.Context, p string) error {
	cmd := exec.CommandContext(ctx, p)
	cmd.Dir = "/"
	uid, gid := os.Geteuid(), os.Getegid()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
		// An unprivileged process may write a gid map only once setgroups
		// is denied.
		GidMappingsEnableSetgroups: false,
	}
	return cmd.Run()
}

// nfnetlink message of nf_tables asking for the ruleset's generation.
const (
	nfnlSubsysNftables = 10
	nftMsgGetGen       = 16
	nftMsgNewGen       = 15
	nlmsgError         = 2
	nlmHdrLen          = 16
)

// netfilterProbe opens a NETLINK_NETFILTER socket and asks nf_tables for
// its generation (what `nft list ruleset` starts with): an answer means
// nf_tables is loaded and this process may use it.
func netfilterProbe(ctx context.Context) error {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, syscall.NETLINK_NETFILTER)
	if err != nil {
		return fmt.Errorf("open a netfilter netlink socket: %w", err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	timeout := 2 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	tv := syscall.NsecToTimeval(max(timeout, time.Millisecond).Nanoseconds())
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
		return err
	}
	msg := make([]byte, nlmHdrLen+4)
	binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], nfnlSubsysNftables<<8|nftMsgGetGen)
	binary.NativeEndian.PutUint16(msg[6:], syscall.NLM_F_REQUEST|syscall.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:], 1) // seq
	msg[nlmHdrLen] = syscall.AF_UNSPEC        // nfgenmsg: family, version 0, res_id 0
	if err := syscall.Sendto(fd, msg, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	buf := make([]byte, 8192)
	for {
		n, _, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) {
				return errors.New("no answer")
			}
			return fmt.Errorf("receive: %w", err)
		}
		for b := buf[:n]; len(b) >= nlmHdrLen; {
			l := int(binary.NativeEndian.Uint32(b[0:]))
			typ := binary.NativeEndian.Uint16(b[4:])
			if l < nlmHdrLen || l > len(b) {
				return errors.New("malformed answer")
			}
			switch {
			case typ == nfnlSubsysNftables<<8|nftMsgNewGen:
				return nil
			case typ == nlmsgError && l >= nlmHdrLen+4:
				if errno := int32(binary.NativeEndian.Uint32(b[nlmHdrLen:])); errno != 0 {
					return syscall.Errno(-errno)
				}
				return nil // the ack
			}
			b = b[min((l+3)&^3, len(b)):]
		}
	}
}
