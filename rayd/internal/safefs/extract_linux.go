package safefs

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Extractor writes a directory tree under a root directory as a user, for
// a restore: only directories, regular files and symbolic links, each
// reached by the descriptor walk (a link or a non-directory in the way is
// [ErrSymlink] or [ErrNotDir], never followed), created with the user's
// identity (so owned by the user), a link or a file at an entry's own
// place replaced, never followed. Directories are made writable for the
// user while the tree is written and get their own permission bits in
// Finish. It is not safe for concurrent use.
type Extractor struct {
	f     *FS
	u     User
	root  string // canonical
	modes map[string]os.FileMode
}

// NewExtractor returns an Extractor for the directory root (resolved as
// for [FS.WriteFile]; it must exist, and be reached as u).
func (f *FS) NewExtractor(ctx context.Context, u User, root string) (*Extractor, error) {
	const op = "extract"
	c, err := f.resolveWrite(u, root)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, perr(op, "canceled", err)
	}
	err = f.runAs(u, func() error {
		fd, err := f.walkDir(op, splitPath(c), nil)
		if err != nil {
			return err
		}
		unix.Close(fd)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Extractor{f: f, u: u, root: c, modes: map[string]os.FileMode{}}, nil
}

// checkRel validates a path relative to the extractor's root: clean,
// relative, without ".." (which the archive layer refuses first), and
// within [MaxPathLen] and [MaxTreeDepth].
func (x *Extractor) checkRel(op, rel string) (string, error) {
	switch {
	case rel == "" || rel == "." || rel[0] == '/':
		return "", perr(op, "invalid", ErrInvalidPath)
	case strings.IndexByte(rel, 0) >= 0:
		return "", perr(op, "nul", ErrInvalidPath)
	case path.Clean(rel) != rel:
		return "", perr(op, "invalid", ErrInvalidPath)
	case len(x.root)+1+len(rel) > MaxPathLen:
		return "", perr(op, "too_long", ErrInvalidPath)
	case strings.Count(rel, "/") >= MaxTreeDepth:
		return "", perr(op, "too_deep", ErrTooDeep)
	}
	for c := range strings.SplitSeq(rel, "/") {
		if c == ".." {
			return "", perr(op, "dotdot", ErrDotDot)
		}
	}
	if x.root == "/" {
		return "/" + rel, nil
	}
	return x.root + "/" + rel, nil
}

// Dir makes the directory rel (missing parents too), or keeps the one
// there; a link or a file in its place is replaced. perm (permission bits
// only) is applied by Finish.
func (x *Extractor) Dir(ctx context.Context, rel string, perm os.FileMode) error {
	const op = "extract"
	p, err := x.checkRel(op, rel)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return perr(op, "canceled", err)
	}
	parent, name := split(p)
	err = x.f.runAs(x.u, func() error {
		dfd, err := x.f.walkDir(op, parent, asUser)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		for range 2 {
			err := unix.Mkdirat(dfd, name, 0o700)
			if err == nil {
				return nil
			}
			if !errors.Is(err, unix.EEXIST) {
				return errnoErr(op, err)
			}
			var st unix.Stat_t
			if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return errnoErr(op, err)
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				// Writable by the user until Finish.
				return x.chmodAt(op, dfd, name, 0o700, true)
			}
			if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
				return errnoErr(op, err)
			}
		}
		return perr(op, "exists", ErrExist)
	})
	if err != nil {
		return err
	}
	x.modes[rel] = perm.Perm()
	return nil
}

// chmodAt sets the permission bits of name in dfd without following a
// link: through an O_PATH descriptor of it (/proc/self/fd/N, as
// [FS.AddWatch] watches). With wantDir, anything but a directory is
// ErrNotDir.
func (x *Extractor) chmodAt(op string, dfd int, name string, perm uint32, wantDir bool) error {
	fd, err := x.f.openat(dfd, name, unix.O_PATH, 0)
	if err != nil {
		return errnoErr(op, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return errnoErr(op, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return perr(op, "symlink", ErrSymlink)
	case wantDir && st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return perr(op, "not_dir", ErrNotDir)
	}
	if st.Mode&0o7777 == perm {
		return nil
	}
	return errnoErr(op, unix.Fchmodat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), perm, 0))
}

// File writes the regular file rel from r (missing parents are made),
// with permission bits perm (exactly: setuid, setgid and sticky are the
// caller's to drop) and modification time mtime, atomically as
// [FS.WriteFile] writes (a link in its place is replaced, never
// followed; a directory there is [ErrIsDir]). The disk reserve applies.
func (x *Extractor) File(ctx context.Context, rel string, r io.Reader, perm os.FileMode, mtime time.Time) error {
	p, err := x.checkRel("extract", rel)
	if err != nil {
		return err
	}
	_, err = x.f.writeFile(ctx, x.u, p, r, writeOptions{perm: perm.Perm(), mtime: mtime})
	return err
}

// Symlink makes rel a symbolic link to target (any string without NUL, at
// most 4095 bytes: it is never followed here), replacing a file or link
// in its place atomically; an empty directory there is replaced too, any
// other is [ErrIsDir].
func (x *Extractor) Symlink(ctx context.Context, rel, target string) error {
	const op = "extract"
	p, err := x.checkRel(op, rel)
	if err != nil {
		return err
	}
	if target == "" || len(target) >= unix.PathMax || strings.IndexByte(target, 0) >= 0 {
		return perr(op, "invalid", ErrInvalidPath)
	}
	if err := ctx.Err(); err != nil {
		return perr(op, "canceled", err)
	}
	parent, name := split(p)
	return x.f.runAs(x.u, func() error {
		dfd, err := x.f.walkDir(op, parent, asUser)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		tmp := TempCreates + randomHex()
		if err := unix.Symlinkat(target, dfd, tmp); err != nil {
			return errnoErr(op, err)
		}
		err = unix.Renameat(dfd, tmp, dfd, name)
		if errors.Is(err, unix.EISDIR) || errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			// A directory is there: replaced only when empty.
			if rerr := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); rerr == nil {
				err = unix.Renameat(dfd, tmp, dfd, name)
			} else {
				err = unix.EISDIR
			}
		}
		if err != nil {
			_ = unix.Unlinkat(dfd, tmp, 0)
			return errnoErr(op, err)
		}
		return nil
	})
}

// RemoveEmptyDir removes rel when it is an empty directory (so that a
// file or link of the archive can take its place); anything else is left
// and reported as [FS.Remove] would.
func (x *Extractor) RemoveEmptyDir(ctx context.Context, rel string) error {
	p, err := x.checkRel("extract", rel)
	if err != nil {
		return err
	}
	return x.f.Remove(ctx, x.u, p, false)
}

// Finish gives every directory made or kept by Dir its permission bits,
// deepest first (a directory without search permission must not stop its
// children's). A directory gone or replaced meanwhile is left alone.
func (x *Extractor) Finish(ctx context.Context) error {
	const op = "extract"
	rels := make([]string, 0, len(x.modes))
	for rel := range x.modes {
		rels = append(rels, rel)
	}
	slices.SortFunc(rels, func(a, b string) int {
		if d := strings.Count(b, "/") - strings.Count(a, "/"); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, rel := range rels {
		if err := ctx.Err(); err != nil {
			return perr(op, "canceled", err)
		}
		p, _ := x.checkRel(op, rel)
		parent, name := split(p)
		err := x.f.runAs(x.u, func() error {
			dfd, err := x.f.walkDir(op, parent, nil)
			if err != nil {
				return err
			}
			defer unix.Close(dfd)
			return x.chmodAt(op, dfd, name, uint32(x.modes[rel]), true)
		})
		if err != nil && !isGone(err) {
			return err
		}
	}
	x.modes = map[string]os.FileMode{}
	return nil
}
