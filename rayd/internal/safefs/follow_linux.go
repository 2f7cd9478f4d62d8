package safefs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// fileID identifies a directory: device and inode.
type fileID struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), st.Ino} }

// fdWalker is the walker of the read-side operations: every step is one
// component opened with [FS.openat] (openat2 with RESOLVE_NO_SYMLINKS,
// RESOLVE_NO_MAGICLINKS and RESOLVE_BENEATH, plus O_NOFOLLOW) relative to
// the descriptor of the current directory, with the thread's (the user's)
// file system identity, so the kernel checks search permission on every
// directory and, for the last component, the open itself.
type fdWalker struct {
	f         *FS
	op        string
	lastFlags int         // open flags of the last component
	fsuid     uint32      // who follows links (protected_symlinks)
	cur       int         // O_PATH descriptor of the current directory
	curSt     unix.Stat_t // its stat
	anc       []fileID    // "/" ... the current directory
	cand      int         // the candidate, or -1
	candSt    unix.Stat_t // its stat
}

// newWalker starts a walk at "/". The last component will be opened with
// lastFlags (O_PATH, or O_RDONLY|... for a read); O_NOFOLLOW and O_CLOEXEC
// are always added.
func (f *FS) newWalker(op string, lastFlags int) (*fdWalker, error) {
	w := &fdWalker{f: f, op: op, lastFlags: lastFlags, cur: -1, cand: -1}
	if uid, err := unix.SetfsuidRetUid(-1); err == nil { // -1 only reports
		w.fsuid = uint32(uid)
	}
	if err := w.root(); err != nil {
		return nil, err
	}
	return w, nil
}

// close releases the walker's descriptors.
func (w *fdWalker) close() {
	closeFD(w.cur)
	closeFD(w.cand)
	w.cur, w.cand = -1, -1
}

// take hands the candidate's descriptor to the caller.
func (w *fdWalker) take() int {
	fd := w.cand
	w.cand = -1
	return fd
}

func (w *fdWalker) dropCand() {
	closeFD(w.cand)
	w.cand = -1
}

func (w *fdWalker) open(name string, last bool) (nodeKind, string, error) {
	w.dropCand()
	flags := unix.O_PATH
	if last {
		flags = w.lastFlags
	}
	fd, err := w.f.openat(w.cur, name, flags, 0)
	if errors.Is(err, unix.EXDEV) {
		// openat2's RESOLVE_BENEATH saw the entry leave the current
		// directory during the lookup (a concurrent rename): look again.
		return 0, "", errRetry
	}
	if errors.Is(err, unix.ELOOP) && flags&unix.O_PATH == 0 {
		// O_NOFOLLOW met a symbolic link: look at it as a link.
		fd, err = w.f.openat(w.cur, name, unix.O_PATH, 0)
		if errors.Is(err, unix.EXDEV) {
			return 0, "", errRetry
		}
		if err != nil {
			return 0, "", errnoErr(w.op, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return 0, "", errnoErr(w.op, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			unix.Close(fd)
			return 0, "", errRetry
		}
		target, err := w.link(fd, &st)
		unix.Close(fd)
		return nodeLink, target, err
	}
	if err != nil {
		return 0, "", errnoErr(w.op, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, "", errnoErr(w.op, err)
	}
	kind := nodeOther
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		target, err := w.link(fd, &st)
		unix.Close(fd)
		return nodeLink, target, err
	case unix.S_IFDIR:
		kind = nodeDir
	}
	if err := checkFS(w.op, fd); err != nil {
		unix.Close(fd)
		return 0, "", err
	}
	w.cand, w.candSt = fd, st
	return kind, "", nil
}

// link reads the target of the link opened as fd (stat st), in the
// current directory. Like the kernel with fs.protected_symlinks=1 (the
// default of every distribution, enforced here whatever the sysctl says),
// it refuses, with EACCES, to follow a link in a sticky world-writable
// directory such as /tmp unless the link belongs to the follower or to
// the directory's owner: another account's link planted there is not
// followed.
func (w *fdWalker) link(fd int, st *unix.Stat_t) (string, error) {
	if w.curSt.Mode&unix.S_ISVTX != 0 && w.curSt.Mode&0o002 != 0 && st.Uid != w.fsuid && st.Uid != w.curSt.Uid {
		return "", perr(w.op, "permission", unix.EACCES)
	}
	return readLink(w.op, fd)
}

// readLink returns the target of the symbolic link opened (O_PATH) as fd.
func readLink(op string, fd int) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", errnoErr(op, err)
	}
	if n >= len(buf) {
		return "", perr(op, "too_long", ErrInvalidPath)
	}
	return string(buf[:n]), nil
}

func (w *fdWalker) enter() error {
	if w.cand < 0 || w.candSt.Mode&unix.S_IFMT != unix.S_IFDIR {
		return perr(w.op, "not_dir", ErrNotDir)
	}
	closeFD(w.cur)
	w.cur, w.curSt = w.cand, w.candSt
	w.cand = -1
	w.anc = append(w.anc, idOf(&w.curSt))
	return nil
}

// up opens ".." of the current directory and checks that it is the
// directory the walk came through (same device and inode). It differs
// only when a directory of the walk was moved meanwhile; the walk then
// fails (with ErrSymlink, as the strict walk does for a component swapped
// under it) rather than go on from a place it did not check.
func (w *fdWalker) up() error {
	w.dropCand()
	if len(w.anc) < 2 {
		return nil
	}
	var fd int
	var err error
	for {
		// Plain openat: openat2's RESOLVE_BENEATH refuses "..". ".." is
		// never a link, and the result is verified below.
		fd, err = unix.Openat(w.cur, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return errnoErr(w.op, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return errnoErr(w.op, err)
	}
	if idOf(&st) != w.anc[len(w.anc)-2] {
		unix.Close(fd)
		return perr(w.op, "symlink", ErrSymlink)
	}
	closeFD(w.cur)
	w.cur, w.curSt = fd, st
	w.anc = w.anc[:len(w.anc)-1]
	return nil
}

func (w *fdWalker) root() error {
	w.dropCand()
	fd, err := openRoot(w.op)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return errnoErr(w.op, err)
	}
	closeFD(w.cur)
	w.cur, w.curSt = fd, st
	w.anc = append(w.anc[:0], idOf(&st))
	return nil
}

// follow resolves comps (a canonical path's components) with every
// symbolic link followed, see [followPath], opening the last component
// with lastFlags. It returns the walker (which the caller closes), the
// result's real canonical path, and whether the result is the walker's
// candidate (else its current directory).
func (f *FS) follow(op string, comps []string, lastFlags int) (*fdWalker, string, bool, error) {
	w, err := f.newWalker(op, lastFlags)
	if err != nil {
		return nil, "", false, err
	}
	rp, atCand, err := followPath(w, op, f.deny, comps)
	if err != nil {
		w.close()
		return nil, "", false, err
	}
	return w, rp, atCand, nil
}

// followDir is follow for a directory: it returns the walker and an O_PATH
// descriptor of the directory (owned by the walker) and its real path.
func (f *FS) followDir(op string, comps []string) (*fdWalker, int, string, error) {
	w, rp, atCand, err := f.follow(op, comps, unix.O_PATH)
	if err != nil {
		return nil, -1, "", err
	}
	if !atCand {
		return w, w.cur, rp, nil
	}
	if w.candSt.Mode&unix.S_IFMT != unix.S_IFDIR {
		w.close()
		return nil, -1, "", perr(op, "not_dir", ErrNotDir)
	}
	return w, w.cand, rp, nil
}
