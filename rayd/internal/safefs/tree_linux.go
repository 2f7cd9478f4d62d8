package safefs

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// This file and extract_linux.go hold the whole-tree operations of HOME
// persistence: a walk that reads a directory tree as the user
// ([FS.WalkTree], for a checkpoint, here) and an [Extractor] that writes
// one as the user (for a restore). Both act through the same descriptor
// walk as every other operation: one component at a time, never following
// a link, with the user's file system identity.

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
	n := opened{fd: -1}
	err := w.f.runAs(w.u, func() error { return w.open(op, dfd, name, &n) })
	st, target, ofd, why := n.st, n.target, n.fd, n.why
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

// opened is what [treeWalker.open] found at a name: its stat, a link's
// target, a descriptor on a file or directory (-1: none), or why the
// walk leaves it out (0: it does not).
type opened struct {
	st     unix.Stat_t
	target string
	fd     int
	why    SkipReason
}

// open describes name in dfd, as the user: a link's target, or a
// descriptor on a file or directory (openNode).
func (w *treeWalker) open(op string, dfd int, name string, n *opened) error {
	if err := unix.Fstatat(dfd, name, &n.st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone meanwhile
		}
		if errors.Is(err, unix.EACCES) {
			n.why = SkipUnreadable
			return nil
		}
		return errnoErr(op, err)
	}
	if n.st.Dev != w.dev {
		n.why = SkipOtherDevice
		return nil
	}
	switch n.st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		fd, err := w.f.openat(dfd, name, unix.O_PATH, 0)
		if err != nil {
			return w.openErr(op, err, &n.why)
		}
		defer unix.Close(fd)
		t, err := readLink(op, fd)
		if err != nil {
			return err
		}
		n.target = t
	case unix.S_IFREG, unix.S_IFDIR:
		return w.openNode(op, dfd, name, n)
	default:
		n.why = SkipSpecial
	}
	return nil
}

// openNode opens the file or directory name in dfd, as the user, and
// checks that it is what the stat saw (or describes what was opened).
func (w *treeWalker) openNode(op string, dfd int, name string, n *opened) error {
	flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY
	if n.st.Mode&unix.S_IFMT == unix.S_IFDIR {
		flags = unix.O_RDONLY | unix.O_DIRECTORY
	}
	fd, err := w.f.openat(dfd, name, flags, 0)
	if err != nil {
		return w.openErr(op, err, &n.why)
	}
	var ost unix.Stat_t
	if err := unix.Fstat(fd, &ost); err != nil {
		unix.Close(fd)
		return errnoErr(op, err)
	}
	if ost.Dev != n.st.Dev || ost.Ino != n.st.Ino {
		// Swapped between the stat and the open: described
		// by what was opened.
		n.st = ost
		if n.st.Dev != w.dev {
			unix.Close(fd)
			n.why = SkipOtherDevice
			return nil
		}
	}
	if err := checkFS(op, fd); err != nil {
		unix.Close(fd)
		return err
	}
	n.fd = fd
	return nil
}

// openErr turns a failed open in the walk into a skip (the user may not
// read it, or it went away) or an error.
func (w *treeWalker) openErr(op string, err error, why *SkipReason) error {
	switch {
	case errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM):
		*why = SkipUnreadable
		return nil
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENXIO) || errors.Is(err, unix.ENOTDIR):
		// Swapped for a link or something else between the stat and
		// the open: what it is now is not read.
		*why = SkipSpecial
		return nil
	}
	return errnoErr(op, err)
}
