package templates

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
)

// baseDir is where a layer keeps its base: the host's /usr as it was when
// the template was built, every file a hard link to the host's own (no
// bytes copied), with the host's owners and modes. The template's build
// runs on it and its sandboxes see it under the layer's usr/, so what a
// template holds no longer changes when the host's packages do: dpkg and
// rpm replace a file by renaming a new one over it, and the layer keeps
// the old one. A layer without it (a state directory on another file
// system than /usr) runs on the host's live /usr.
const baseDir = launcher.TemplateBaseDir

// maxBaseEntries bounds the snapshot (Debian's full desktop /usr has
// about 400 000 entries).
const maxBaseEntries = 2_000_000

// errBaseCrossDevice: the state directory is not on /usr's file system.
var errBaseCrossDevice = errors.New("the state directory is on another file system than /usr")

// snapshotUsr makes dst (which must not exist) a tree of hard links to
// every entry under src, directories made with src's owners and modes. It
// returns the number of entries. On error dst may be partly made: the
// caller removes it (RemoveAll unlinks, never touching the host's files).
func snapshotUsr(src, dst string) (int, error) {
	n := 0
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > maxBaseEntries {
			return fmt.Errorf("more than %d entries", maxBaseEntries)
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if !e.IsDir() {
			// link(2) links a symbolic link itself, never its target.
			if err := os.Link(p, target); err != nil {
				if errors.Is(err, syscall.EXDEV) {
					return errBaseCrossDevice
				}
				return err
			}
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return errors.New("no owner")
		}
		if err := os.Mkdir(target, 0o700); err != nil {
			return err
		}
		if err := os.Lchown(target, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		return os.Chmod(target, info.Mode()&(fs.ModePerm|fs.ModeSetgid|fs.ModeSticky))
	})
	return n, err
}
