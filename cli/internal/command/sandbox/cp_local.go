package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// localDir writes what cp brings out of a sandbox below one local
// directory, the one the user named (DST or its parent), which may be
// reached through symbolic links the user put there. Below it nothing is
// ever written through a symbolic link: every directory on the way of
// every write is checked with lstat and refused when it is a link, and
// os.Root keeps every operation inside the directory even when a link
// appears between the check and the use. Modes come from the sandbox, masked to 0777 and
// by the umask (never set-id bits, never wider than a new file of this
// user would be).
type localDir struct {
	root  *os.Root
	shown string // the directory as errors name it
	// fixups are modes to restore at the end: directories made writable
	// and searchable for the copy though their own mode is not.
	fixups []fixup
}

type fixup struct {
	rel  string
	mode fs.FileMode
}

func openLocalDir(dir string) (*localDir, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, localErr(dir, err)
	}
	return &localDir{root: r, shown: dir}, nil
}

// close restores the modes of the directories made with fewer rights than
// the copy needed, the deepest first.
func (l *localDir) close() error {
	var first error
	for i := len(l.fixups) - 1; i >= 0; i-- {
		fx := l.fixups[i]
		if err := l.root.Chmod(fx.rel, fx.mode); err != nil && first == nil {
			first = localErr(l.show(fx.rel), err)
		}
	}
	if err := l.root.Close(); err != nil && first == nil {
		first = localErr(l.shown, err)
	}
	return first
}

// show is how errors name rel.
func (l *localDir) show(rel string) string {
	if rel == "" || rel == "." {
		return l.shown
	}
	return filepath.Join(l.shown, filepath.FromSlash(rel))
}

// mkdirs makes sure the directories of slash path rel exist as real
// directories, making the missing ones: rel itself with mode perm, those
// above it (which a listing names first, so never in practice) 0700.
func (l *localDir) mkdirs(rel string, perm fs.FileMode) error {
	if rel == "" || rel == "." {
		return nil
	}
	cur := ""
	comps := strings.Split(rel, "/")
	for i, comp := range comps {
		cur = path.Join(cur, comp)
		fi, err := l.root.Lstat(cur)
		switch {
		case err == nil && fi.IsDir():
			continue
		case err == nil && fi.Mode()&fs.ModeSymlink != 0:
			return &cpError{l.show(cur), "is a symbolic link: not writing through it"}
		case err == nil:
			return &cpError{l.show(cur), "not a directory"}
		case !errors.Is(err, fs.ErrNotExist):
			return localErr(l.show(cur), err)
		}
		mode := fs.FileMode(0o700)
		if i == len(comps)-1 {
			mode = perm & fs.ModePerm
		}
		if err := l.mkdir(cur, mode); err != nil {
			return err
		}
	}
	return nil
}

// mkdir makes directory rel with mode (the umask applies); while the copy
// runs it is kept writable and searchable by its owner.
func (l *localDir) mkdir(rel string, mode fs.FileMode) error {
	if err := l.root.Mkdir(rel, mode); err != nil {
		return localErr(l.show(rel), err)
	}
	fi, err := l.root.Lstat(rel)
	if err != nil {
		return localErr(l.show(rel), err)
	}
	if got := fi.Mode().Perm(); got&0o700 != 0o700 {
		if err := l.root.Chmod(rel, got|0o700); err != nil {
			return localErr(l.show(rel), err)
		}
		l.fixups = append(l.fixups, fixup{rel, got})
	}
	return nil
}

// parentOf checks that the directory of slash path rel is a real one.
func (l *localDir) parentOf(rel string) error {
	if dir := path.Dir(rel); dir != "." {
		return l.mkdirs(dir, 0o700)
	}
	return nil
}

// tempName is a fresh name beside rel for a file renamed into place.
func tempName(rel string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return path.Join(path.Dir(rel), ".rayito-cp-"+hex.EncodeToString(b[:]))
}

// writeFile writes r to slash path rel with mode perm (the umask
// applies) through a temporary file renamed into place: what was at rel
// (a file, a symbolic link) is replaced, never written through. It
// returns the bytes written; a read error comes back as it is, a local
// one names rel.
func (l *localDir) writeFile(rel string, r io.Reader, perm fs.FileMode) (int64, error) {
	if err := l.parentOf(rel); err != nil {
		return 0, err
	}
	var (
		tmp string
		fh  *os.File
		err error
	)
	for range 5 {
		tmp = tempName(rel)
		fh, err = l.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm&fs.ModePerm)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return 0, localErr(l.show(rel), err)
	}
	done := false
	defer func() {
		if !done {
			_ = fh.Close()
			_ = l.root.Remove(tmp)
		}
	}()
	n, err := io.Copy(fh, r)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return n, localErr(l.show(rel), err)
		}
		return n, err
	}
	err = fh.Sync()
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	done = true
	if err == nil {
		err = l.root.Rename(tmp, rel)
	}
	if err != nil {
		_ = l.root.Remove(tmp)
		return n, localErr(l.show(rel), err)
	}
	return n, nil
}

// symlink makes slash path rel a symbolic link to target (which is not
// checked: it is the sandbox's link, recreated as docker cp does),
// replacing what was at rel unless it is a directory.
func (l *localDir) symlink(rel, target string) error {
	if err := l.parentOf(rel); err != nil {
		return err
	}
	tmp := tempName(rel)
	if err := l.root.Symlink(target, tmp); err != nil {
		return localErr(l.show(rel), err)
	}
	if err := l.root.Rename(tmp, rel); err != nil {
		_ = l.root.Remove(tmp)
		return localErr(l.show(rel), err)
	}
	return nil
}
