package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/rayd/internal/identity"
)

// openPTY opens a new pseudo-terminal with the given window size and
// returns its master (non-blocking, close-on-exec, read through the
// runtime poller) and its slave (blocking, close-on-exec; the child gets it
// as fds 0-2). The slave belongs to id when set, like a login terminal.
func openPTY(cols, rows uint16, id *identity.Identity) (master, slave *os.File, err error) {
	mfd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("proc: open pty: %w", err)
	}
	sfd := -1
	defer func() {
		if err != nil {
			_ = unix.Close(mfd)
			if sfd >= 0 {
				_ = unix.Close(sfd)
			}
		}
	}()
	if err = unix.IoctlSetPointerInt(mfd, unix.TIOCSPTLCK, 0); err != nil {
		return nil, nil, fmt.Errorf("proc: unlock pty: %w", err)
	}
	if sfd, err = openPeer(mfd); err != nil {
		return nil, nil, fmt.Errorf("proc: open pty slave: %w", err)
	}
	if err = unix.IoctlSetWinsize(mfd, unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows}); err != nil {
		return nil, nil, fmt.Errorf("proc: set pty size: %w", err)
	}
	if id != nil {
		if err = unix.Fchown(sfd, int(id.UID), int(id.GID)); err != nil {
			return nil, nil, fmt.Errorf("proc: chown pty: %w", err)
		}
		if err = unix.Fchmod(sfd, 0o620); err != nil {
			return nil, nil, fmt.Errorf("proc: chmod pty: %w", err)
		}
	}
	// The names carry no user data.
	return os.NewFile(uintptr(mfd), "ptmx"), os.NewFile(uintptr(sfd), "pts"), nil
}

// openPeer opens the slave of master: TIOCGPTPEER (Linux 4.13) finds it in
// the master's own devpts instance; older kernels fall back to the path
// from TIOCGPTN.
func openPeer(mfd int) (int, error) {
	const flags = unix.O_RDWR | unix.O_NOCTTY | unix.O_CLOEXEC
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(mfd), unix.TIOCGPTPEER, flags)
	if errno == 0 {
		return int(r), nil
	}
	if !errors.Is(errno, unix.EINVAL) && !errors.Is(errno, unix.ENOTTY) {
		return -1, errno
	}
	n, err := unix.IoctlGetUint32(mfd, unix.TIOCGPTN)
	if err != nil {
		return -1, err
	}
	return unix.Open("/dev/pts/"+strconv.FormatUint(uint64(n), 10), flags, 0)
}

// setWinsize sets the window size of a terminal.
func setWinsize(fd uintptr, cols, rows uint16) error {
	return unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, &unix.Winsize{Col: cols, Row: rows})
}
