package safefs

import (
	"context"
	"path"

	"golang.org/x/sys/unix"
)

// Stat describes the object at p with lstat(2) semantics: the last
// component is not followed, so a symbolic link is reported as a link
// (TypeSymlink, with its target in SymlinkTarget), as [FS.ListDir] reports
// it. Symbolic links in the directories above it are followed as for
// [FS.ReadFile]; the real path of the object must not be denied.
func (f *FS) Stat(ctx context.Context, u User, p string) (Entry, error) {
	return f.stat(ctx, u, p, false)
}

// StatFollow is [FS.Stat] with stat(2) semantics: a symbolic link as the
// last component is followed too (as [FS.ReadFile] follows it) and the
// entry describes its target, under the requested name and path.
func (f *FS) StatFollow(ctx context.Context, u User, p string) (Entry, error) {
	return f.stat(ctx, u, p, true)
}

func (f *FS) stat(ctx context.Context, u User, p string, followLast bool) (Entry, error) {
	const op = "stat"
	c, err := f.Resolve(u, p)
	if err != nil {
		return Entry{}, err
	}
	if err := ctx.Err(); err != nil {
		return Entry{}, perr(op, "canceled", err)
	}
	var e Entry
	err = f.runAs(u, func() error {
		if c == "/" {
			fd, err := openRoot(op)
			if err != nil {
				return err
			}
			defer unix.Close(fd)
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				return errnoErr(op, err)
			}
			e = f.entryFromStat("/", "/", &st)
			return nil
		}
		parent, name := split(c)
		if followLast {
			w, rp, atCand, err := f.follow(op, splitPath(c), unix.O_PATH)
			if err != nil {
				return err
			}
			defer w.close()
			if atCand {
				// Described again by its name in its real directory (which
				// also reads its metadata through a descriptor of it).
				var fd int
				e, fd, err = f.entryAt(op, w.cur, path.Base(rp), c, true)
				closeFD(fd)
				e.Name = name
				return err
			}
			e = f.entryFromStat(name, c, &w.curSt)
			if mfd, err := f.openat(w.cur, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0); err == nil {
				e.Metadata = f.readMetadata(mfd)
				unix.Close(mfd)
			}
			return nil
		}
		w, dfd, rp, err := f.followDir(op, parent)
		if err != nil {
			return err
		}
		defer w.close()
		if isDenied(f.deny, path.Join(rp, name)) {
			return perr(op, "denied", ErrDenied)
		}
		var fd int
		e, fd, err = f.entryAt(op, dfd, name, c, true)
		closeFD(fd)
		if err == nil && f.envd && e.Type == TypeSymlink {
			f.describeLink(op, &e, path.Join(rp, name))
		}
		return err
	})
	if err != nil {
		return Entry{}, err
	}
	f.fillNames(&e)
	return e, nil
}
