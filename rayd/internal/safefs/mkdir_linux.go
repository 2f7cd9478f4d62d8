package safefs

import (
	"context"
	"errors"

	"golang.org/x/sys/unix"
)

// MakeDir creates the directory p and any missing parents (mode 0755, owned
// by the user). It fails with [ErrExist] when p already is a directory and
// with [ErrNotDir] when a non-directory is in the way (at p or above).
func (f *FS) MakeDir(ctx context.Context, u User, p string) (Entry, error) {
	const op = "mkdir"
	c, err := f.resolveWrite(u, p)
	if err != nil {
		return Entry{}, err
	}
	if c == "/" {
		return Entry{}, perr(op, "exists", ErrExist)
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, perr(op, "canceled", err)
	}
	var e Entry
	err = f.runAsSudo(u, func(s sudo) error {
		parent, name := split(c)
		cr := f.creatorFor(u, s)
		dfd, err := f.walkDir(op, parent, cr)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		if err := f.mkdirFor(dfd, name, cr); err != nil {
			if !errors.Is(err, unix.EEXIST) {
				return errnoErr(op, err)
			}
			var st unix.Stat_t
			if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
				return perr(op, "not_dir", ErrNotDir)
			}
			return perr(op, "exists", ErrExist)
		}
		var fd int
		e, fd, err = f.entryAt(op, dfd, name, c, false)
		closeFD(fd)
		return err
	})
	if err != nil {
		return Entry{}, err
	}
	f.fillNames(&e)
	return e, nil
}
