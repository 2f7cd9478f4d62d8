package launcher

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// selfExe is the executable sandboxes start from when Options.Binary is
// not set: this binary.
const selfExe = "/proc/self/exe"

// binaryMinFD is the lowest descriptor number a sandbox binary is held
// at. A sandbox's init is started by its /proc/self/fd path, and the
// child moves its ExtraFiles (a handful, from 3 up) into place before it
// executes that path: the binary's descriptor must lie above them all.
const binaryMinFD = 64

// openBinary opens Options.Binary once: every sandbox of the launcher
// starts from that file (through /proc/self/fd, which also reaches it
// from a sandbox's user namespace), whatever later happens to the path.
// The file must be a regular executable file of root or of this user,
// that nobody else can write: it runs as a sandbox's init and rayd, and
// as its sudo.
func openBinary(path string) (*os.File, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%w: %q is not an absolute path", ErrBinary, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBinary, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrBinary, path, err)
	}
	var why string
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		why = "not a regular file"
	case st.Mode&0o100 == 0:
		why = "not executable by its owner"
	case st.Uid != 0 && int(st.Uid) != os.Geteuid():
		why = "owned by uid " + strconv.FormatUint(uint64(st.Uid), 10) + ", neither root nor this user"
	case st.Mode&0o022 != 0:
		why = "writable by its group or others"
	}
	if why != "" {
		f.Close()
		return nil, fmt.Errorf("%w: %s is %s", ErrBinary, path, why)
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, binaryMinFD)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrBinary, path, err)
	}
	return os.NewFile(uintptr(fd), path), nil
}

// fdPath is the path through which this process executes f.
func fdPath(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }

// checkBinaryStamp compares the build stamp a sandbox binary's probe
// answered with this binary's.
func checkBinaryStamp(path, theirs string) error {
	ours := BuildStamp()
	if ours == develStamp || theirs == develStamp || theirs == ours {
		return nil
	}
	if theirs == "" {
		theirs = "no version (an older binary)"
	}
	return fmt.Errorf("%w: %s was built from %s, this platform from %s: use the sandbox binary of the same release", ErrBinary, path, theirs, ours)
}

// probeAnswer checks a probe's output: probeReply, then the binary's
// build stamp (absent from binaries older than stamps). It returns the
// stamp.
func probeAnswer(out string) (string, error) {
	first, stamp, _ := strings.Cut(strings.TrimSpace(out), "\n")
	if strings.TrimSpace(first) != probeReply {
		return "", errors.New("the binary does not answer as a sandbox init (a rayito-sandbox, or a binary whose main calls localvm.MaybeRunInit first)")
	}
	return strings.TrimSpace(stamp), nil
}

// closeBinary closes the sandbox binary, if any (Release).
func (l *Launcher) closeBinary() {
	if l.bin != nil {
		l.bin.Close()
	}
}
