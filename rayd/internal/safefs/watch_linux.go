package safefs

import (
	"errors"
	"strconv"

	"golang.org/x/sys/unix"
)

// AddWatch adds an inotify watch (on instance inotifyFD, with mask) on the
// directory at p, for u. The directory is reached by the safe walk, as the
// user, and watched through its own descriptor (/proc/self/fd/N), so a
// component swapped for a symbolic link is refused, not followed, and the
// kernel's permission check is the user's. IN_DONT_FOLLOW is dropped from
// mask: the descriptor's magic link must be followed to its directory.
func (f *FS) AddWatch(u User, inotifyFD int, p string, mask uint32) (int, error) {
	const op = "watch"
	c, err := f.Resolve(u, p)
	if err != nil {
		return -1, err
	}
	wd := -1
	err = f.runAs(u, func() error {
		var fd int
		var err error
		if c == "/" {
			fd, err = openRoot(op)
		} else {
			parent, name := split(c)
			var dfd int
			if dfd, err = f.walkDir(op, parent, nil); err != nil {
				return err
			}
			fd, err = f.openat(dfd, name, unix.O_PATH, 0)
			unix.Close(dfd)
			if err != nil {
				return errnoErr(op, err)
			}
		}
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return errnoErr(op, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
		case unix.S_IFLNK:
			return perr(op, "symlink", ErrSymlink)
		default:
			return perr(op, "not_dir", ErrNotDir)
		}
		if err := checkFS(op, fd); err != nil {
			return err
		}
		for {
			wd, err = unix.InotifyAddWatch(inotifyFD, "/proc/self/fd/"+strconv.Itoa(fd), mask&^unix.IN_DONT_FOLLOW)
			if !errors.Is(err, unix.EINTR) {
				break
			}
		}
		if err != nil {
			return errnoErr(op, err)
		}
		return nil
	})
	return wd, err
}
