package safefs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// This file holds the whole-tree operations of HOME persistence: a walk
// that reads a directory tree as the user ([FS.WalkTree], for a
// checkpoint) and an [Extractor] that writes one as the user (for a
// restore). Both act through the same descriptor walk as every other
// operation: one component at a time, never following a link, with the
// user's file system identity.

// SkipReason says why [FS.WalkTree] left an entry out.
type SkipReason int

// Reasons to leave an entry out of a walk.
const (
	// SkipSpecial: a FIFO, a socket or a device.
	SkipSpecial SkipReason = iota + 1
	// SkipUnreadable: a file or directory the user may not read (another
	// uid's, or a mode that forbids it).
	SkipUnreadable
	// SkipOtherDevice: a mount point (or a file bound there): the walk
	// never crosses file systems.
	SkipOtherDevice
)

// TreeEntry is one object [FS.WalkTree] visits.
type TreeEntry struct {
	// Rel is the path relative to the walk's root, "/"-separated.
	Rel string
	// Type is TypeFile, TypeDir or TypeSymlink.
	Type FileType
	// Mode holds the permission bits plus Go's type, setuid, setgid and
	// sticky bits.
	Mode    fs.FileMode
	Size    int64
	ModTime time.Time
	// Target is a symbolic link's target, as stored in the link.
	Target string
	// File is a regular file's content, opened for reading as the user
	// (nil otherwise). It is valid during the visit only: the walk closes
	// it.
	File *os.File
}

// WalkOptions shape [FS.WalkTree].
type WalkOptions struct {
	// Exclude, when set, leaves out an entry (and, for a directory,
	// everything under it) before it is opened. dir tells a directory.
	Exclude func(rel string, dir bool) bool
	// Visit is called for every directory (before what it holds), regular
	// file and symbolic link, depth first in byte order of the names. An
	// error stops the walk and is returned as is.
	Visit func(e TreeEntry) error
	// Skipped, when set, is told of every entry left out, and why. What is
	// under a skipped directory is not visited nor counted.
	Skipped func(rel string, why SkipReason)
}

// MaxTreeDepth bounds how deep [FS.WalkTree] and an [Extractor] go.
const MaxTreeDepth = 256

// WalkTree visits the tree under the directory root (a path resolved as
// for [FS.Stat], which must be a directory and not a link) as the user u:
// every directory is opened and listed, every regular file opened, every
// link read (never followed) with u's identity, so the kernel's
// permission checks are u's. What u may not read is skipped
// (SkipUnreadable), as are FIFOs, sockets and devices (SkipSpecial) and
// whatever lies on another file system than root (SkipOtherDevice). The
// root itself is not visited. Deeper than [MaxTreeDepth] levels is
// [ErrTooDeep].
//
// Visit runs with rayd's own identity; the files it is given were opened
// as u.
func (f *FS) WalkTree(ctx context.Context, u User, root string, o WalkOptions) error {
	const op = "walk"
	c, err := f.Resolve(u, root)
	if err != nil {
		return err
	}
	var rootFD int
	var rootSt unix.Stat_t
	err = f.runAs(u, func() error {
		fd, err := f.walkDir(op, splitPath(c), nil)
		if err != nil {
			return err
		}
		rfd, err := f.openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			return errnoErr(op, err)
		}
		if err := unix.Fstat(rfd, &rootSt); err != nil {
			unix.Close(rfd)
			return errnoErr(op, err)
		}
		rootFD = rfd
		return nil
	})
	if err != nil {
		return err
	}
	w := &treeWalker{f: f, u: u, o: o, dev: rootSt.Dev}
	return w.dir(ctx, rootFD, "", 0)
}

type treeWalker struct {
	f   *FS
	u   User
	o   WalkOptions
	dev uint64
}

func (w *treeWalker) skip(rel string, why SkipReason) {
	if w.o.Skipped != nil {
		w.o.Skipped(rel, why)
	}
}

// dir lists the directory dfd (opened O_RDONLY as the user; dir closes
// it), whose path is rel, and visits what it holds.
func (w *treeWalker) dir(ctx context.Context, dfd int, rel string, depth int) error {
	const op = "walk"
	d := os.NewFile(uintptr(dfd), "safefs")
	defer d.Close()
	if depth >= MaxTreeDepth {
		return perr(op, "too_deep", ErrTooDeep)
	}
	var names []string
	for {
		batch, err := d.Readdirnames(1024)
		names = append(names, batch...)
		if err == io.EOF || len(batch) == 0 {
			break
		}
		if err != nil {
			return errnoErr(op, err)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return perr(op, "canceled", err)
		}
		crel := name
		if rel != "" {
			crel = rel + "/" + name
		}
		if err := w.entry(ctx, dfd, name, crel, depth); err != nil {
			return err
		}
	}
	return nil
}

// entry describes and visits name in dfd.
func (w *treeWalker) entry(ctx context.Context, dfd int, name, rel string, depth int) error {
	const op = "walk"
	var (
		st     unix.Stat_t
		target string
		ofd    = -1
		why    SkipReason
	)
	err := w.f.runAs(w.u, func() error {
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				return nil // gone meanwhile
			}
			if err == unix.EACCES {
				why = SkipUnreadable
				return nil
			}
			return errnoErr(op, err)
		}
		if st.Dev != w.dev {
			why = SkipOtherDevice
			return nil
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			fd, err := w.f.openat(dfd, name, unix.O_PATH, 0)
			if err != nil {
				return w.openErr(op, err, &why)
			}
			defer unix.Close(fd)
			t, err := readLink(op, fd)
			if err != nil {
				return err
			}
			target = t
		case unix.S_IFREG, unix.S_IFDIR:
			flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				flags = unix.O_RDONLY | unix.O_DIRECTORY
			}
			fd, err := w.f.openat(dfd, name, flags, 0)
			if err != nil {
				return w.openErr(op, err, &why)
			}
			var ost unix.Stat_t
			if err := unix.Fstat(fd, &ost); err != nil {
				unix.Close(fd)
				return errnoErr(op, err)
			}
			if ost.Dev != st.Dev || ost.Ino != st.Ino {
				// Swapped between the stat and the open: described
				// by what was opened.
				st = ost
				if st.Dev != w.dev {
					unix.Close(fd)
					why = SkipOtherDevice
					return nil
				}
			}
			if err := checkFS(op, fd); err != nil {
				unix.Close(fd)
				return err
			}
			ofd = fd
		default:
			why = SkipSpecial
		}
		return nil
	})
	if err != nil {
		closeFD(ofd)
		return err
	}
	if why != 0 {
		w.skip(rel, why)
		return nil
	}
	if st.Mode == 0 && ofd < 0 && target == "" {
		return nil // gone
	}
	e := TreeEntry{
		Rel:     rel,
		Mode:    goMode(st.Mode),
		Size:    st.Size,
		ModTime: time.Unix(int64(st.Mtim.Sec), int64(st.Mtim.Nsec)),
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		e.Type, e.Target, e.Size = TypeSymlink, target, 0
	case unix.S_IFDIR:
		e.Type, e.Size = TypeDir, 0
	case unix.S_IFREG:
		e.Type = TypeFile
	default:
		// An open that raced into something else: left out as special.
		closeFD(ofd)
		w.skip(rel, SkipSpecial)
		return nil
	}
	if w.o.Exclude != nil && w.o.Exclude(rel, e.Type == TypeDir) {
		closeFD(ofd)
		return nil
	}
	if e.Type == TypeFile {
		e.File = os.NewFile(uintptr(ofd), "safefs")
		err := w.o.Visit(e)
		e.File.Close()
		return err
	}
	if e.Type == TypeSymlink {
		return w.o.Visit(e)
	}
	if err := w.o.Visit(e); err != nil {
		closeFD(ofd)
		return err
	}
	return w.dir(ctx, ofd, rel, depth+1)
}

// openErr turns a failed open in the walk into a skip (the user may not
// read it, or it went away) or an error.
func (w *treeWalker) openErr(op string, err error, why *SkipReason) error {
	switch err {
	case unix.EACCES, unix.EPERM:
		*why = SkipUnreadable
		return nil
	case unix.ENOENT:
		return nil
	case unix.ELOOP, unix.ENXIO, unix.ENOTDIR:
		// Swapped for a link or something else between the stat and
		// the open: what it is now is not read.
		*why = SkipSpecial
		return nil
	}
	return errnoErr(op, err)
}

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
			if err != unix.EEXIST {
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
			if err := unix.Unlinkat(dfd, name, 0); err != nil && err != unix.ENOENT {
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
		if err == unix.EISDIR || err == unix.ENOTEMPTY || err == unix.EEXIST {
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

// isGone reports the errors of an entry that is no longer what was made.
func isGone(err error) bool {
	return errIs(err, unix.ENOENT) || errIs(err, ErrSymlink) || errIs(err, ErrNotDir)
}

// SpoolFile opens an unnamed temporary file (O_TMPFILE) in the directory
// dir, as the user: room on dir's file system for data rayd holds before
// it writes it there (a restore's archive, checked before anything is
// extracted). Nobody can open it by a name; it is gone once closed.
func (f *FS) SpoolFile(ctx context.Context, u User, dir string) (*os.File, error) {
	const op = "spool"
	c, err := f.resolveWrite(u, dir)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, perr(op, "canceled", err)
	}
	fd := -1
	err = f.runAs(u, func() error {
		dfd, err := f.walkDir(op, splitPath(c), nil)
		if err != nil {
			return err
		}
		defer unix.Close(dfd)
		nfd, err := unix.Openat(dfd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return errnoErr(op, err)
		}
		fd = nfd
		return nil
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "safefs"), nil
}

// CheckReserve fails with [ErrDiskReserve] when n more bytes on the file
// system of file would leave less than the disk reserve (see
// [FS.WriteFile]).
func (f *FS) CheckReserve(file *os.File, n int64) error {
	sc, err := file.SyscallConn()
	if err != nil {
		return perr("reserve", "io", err)
	}
	var rerr error
	if err := sc.Control(func(fd uintptr) { rerr = f.checkReserve("reserve", int(fd), int(min(n, int64(^uint(0)>>1)))) }); err != nil {
		return perr("reserve", "io", err)
	}
	return rerr
}

func randomHex() string {
	var rnd [8]byte
	rand.Read(rnd[:])
	return hex.EncodeToString(rnd[:])
}

func errIs(err, target error) bool { return errors.Is(err, target) }
