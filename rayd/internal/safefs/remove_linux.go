package safefs

import (
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Remove deletes p. A directory needs recursive unless it is empty
// ([ErrNotEmpty]). Recursion goes through directory descriptors opened
// with O_NOFOLLOW and unlinkat, so symbolic links are removed, never
// followed, and denied file systems are never entered.
func (f *FS) Remove(ctx context.Context, u User, p string, recursive bool) error {
	const op = "remove"
	c, err := f.resolveWrite(u, p)
	if err != nil {
		return err
	}
	if c == "/" {
		return perr(op, "denied", ErrDenied)
	}
	if err := ctx.Err(); err != nil {
		return perr(op, "canceled", err)
	}
	return f.runAsSudo(u, func(s sudo) error {
		parent, name := split(c)
		dfd, err := f.walkDir(op, parent, nil)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		err = f.removeAt(ctx, op, dfd, name, recursive, 0)
		if f.envd && errors.Is(err, os.ErrPermission) && !errors.Is(err, ErrDenied) {
			return f.unlinkFor(op, dfd, name, u, s, err)
		}
		return err
	})
}

// unlinkFor removes name from dirfd for u where only rayd may, for an
// [Options.Envd] FS: the mirror of [FS.mkdirFor], so that what rayd made
// for the user in a directory the user cannot write (/0 of /0/x), the
// user can remove again, as on envd. Only an entry that belongs to the user
// (what is under it is already gone, removed as the user), in a directory
// the user's walk reached and may search, whose own removal was refused
// for permission (refused is that error); the directory is not writable
// by the user, so the entry cannot be swapped between the check and the
// unlink.
func (f *FS) unlinkFor(op string, dirfd int, name string, u User, s sudo, refused error) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Uid != u.UID {
		return refused
	}
	sfd, err := f.openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return refused
	}
	unix.Close(sfd)
	flags := 0
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.AT_REMOVEDIR
	}
	return errnoErr(op, s(func() error {
		var now unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if now.Ino != st.Ino || now.Dev != st.Dev || now.Uid != u.UID {
			return unix.EACCES
		}
		return unix.Unlinkat(dirfd, name, flags)
	}))
}

func (f *FS) removeAt(ctx context.Context, op string, dirfd int, name string, recursive bool, level int) error {
	if err := ctx.Err(); err != nil {
		return perr(op, "canceled", err)
	}
	if level > MaxRemoveDepth {
		return perr(op, "too_deep", ErrTooDeep)
	}
	fd, err := f.openat(dirfd, name, unix.O_PATH, 0)
	if err != nil {
		return errnoErr(op, err)
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	if err == nil {
		err = checkFS(op, fd)
	}
	unix.Close(fd)
	if err != nil {
		return errnoErr(op, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return errnoErr(op, unix.Unlinkat(dirfd, name, 0))
	}
	if recursive {
		sub, err := f.openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return errnoErr(op, err)
		}
		if err := checkFS(op, sub); err != nil {
			unix.Close(sub)
			return err
		}
		d := os.NewFile(uintptr(sub), "safefs")
		defer d.Close()
		names, err := d.Readdirnames(-1)
		if err != nil {
			return errnoErr(op, err)
		}
		for _, n := range names {
			if err := f.removeAt(ctx, op, sub, n, true, level+1); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if err := unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR); err != nil {
		return errnoErr(op, err)
	}
	return nil
}
