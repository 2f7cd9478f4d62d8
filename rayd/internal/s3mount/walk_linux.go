package s3mount

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrInvalidPath is a mount path that cannot be walked safely: a symbolic
// link or something other than a directory on the way, or a directory
// that cannot be made.
var ErrInvalidPath = errors.New("s3mount: invalid mount path")

// point is a walked mount point: the O_PATH descriptors of its parent and
// of itself (the directory mounted over), and its last component.
type point struct {
	parent int
	dir    int
	base   string
	// mnt is the mount's own descriptor (its root), -1 without the new
	// mount API.
	mnt int
}

func (p *point) close() {
	for _, fd := range []int{p.dir, p.parent, p.mnt} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	p.dir, p.parent, p.mnt = -1, -1, -1
}

// openStep opens one component under dirfd without following any
// symbolic link (openat2 RESOLVE_NO_SYMLINKS, which also refuses magic
// links) and only as a directory.
func openStep(dirfd int, name string) (int, error) {
	fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH,
	})
	if err == unix.ENOSYS {
		// Kernels before 5.6: O_NOFOLLOW on a single component is the
		// same guarantee (the name holds no '/').
		fd, err = unix.Openat(dirfd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	}
	return fd, err
}

// walk opens the mount point p (valid per package proto/s3mount) from
// root, one component at a time, refusing symbolic links at every level.
// Missing directories below /mnt/ or /home/user/ are made with mode 0755
// and given to owner (uid, gid); /mnt itself, when missing, is made as
// root. Every failure is ErrInvalidPath.
func walk(root, p string, uid, gid int) (*point, error) {
	comps := strings.Split(strings.TrimPrefix(p, "/"), "/")
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, ErrInvalidPath
	}
	// The components of the root directory (/mnt, /home/user) belong to
	// root; those below to the sandbox's user.
	ownFrom := 1
	if comps[0] == "home" {
		ownFrom = 2
	}
	parent := -1
	for i, c := range comps {
		nfd, err := openStep(fd, c)
		if errors.Is(err, unix.ENOENT) && (i >= ownFrom || comps[0] == "mnt") {
			if merr := unix.Mkdirat(fd, c, 0o755); merr != nil && merr != unix.EEXIST {
				unix.Close(fd)
				closeFD(parent)
				return nil, ErrInvalidPath
			}
			nfd, err = openStep(fd, c)
			if err == nil && i >= ownFrom {
				// Through the new descriptor: what was made, not what a
				// racing rename put at the name.
				_ = unix.Fchownat(nfd, "", uid, gid, unix.AT_EMPTY_PATH)
			}
		}
		if err != nil {
			unix.Close(fd)
			closeFD(parent)
			return nil, ErrInvalidPath
		}
		closeFD(parent)
		parent, fd = fd, nfd
	}
	return &point{parent: parent, dir: fd, base: comps[len(comps)-1], mnt: -1}, nil
}

func closeFD(fd int) {
	if fd >= 0 {
		unix.Close(fd)
	}
}
