// Package fscopy copies directory trees the local platform owns (a
// template's layer, the home it seeds a sandbox with) without following a
// link: directories, regular files and links, and on request overlayfs
// whiteouts and the user.overlay.* attributes; never devices, FIFOs or
// sockets. The destination's entries are created (O_EXCL, O_NOFOLLOW), so
// nothing in it is written through.
package fscopy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrTooLarge is Tree's error past Options.Limit.
var ErrTooLarge = errors.New("more file data than allowed")

// Options say what Tree copies and how.
type Options struct {
	// UID, when not negative, owns every copied entry (as its group too).
	UID int
	// Limit, when positive, bounds the file data copied.
	Limit int64
	// Overlay copies overlayfs whiteouts (0/0 character devices) and the
	// user.overlay.* attributes (opaque directories).
	Overlay bool
}

// Tree copies src into dst (created when missing; an absent src copies
// nothing). Modes keep their permission bits, set-id bits dropped.
func Tree(src, dst string, o Options) error {
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var total int64
	return filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		info, err := e.Info()
		if err != nil {
			return err
		}
		m := info.Mode()
		switch {
		case m.IsDir():
			if err := os.Mkdir(out, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if err := os.Chmod(out, m.Perm()); err != nil {
				return err
			}
		case m.IsRegular():
			total += info.Size()
			if o.Limit > 0 && total > o.Limit {
				return fmt.Errorf("%w: %d bytes", ErrTooLarge, o.Limit)
			}
			if err := copyFile(p, out, m.Perm()); err != nil {
				return err
			}
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, out); err != nil {
				return err
			}
		case o.Overlay && m&fs.ModeCharDevice != 0:
			st, ok := info.Sys().(*syscall.Stat_t)
			if !ok || st.Rdev != 0 {
				return nil // only whiteouts
			}
			if err := unix.Mknod(out, unix.S_IFCHR, 0); err != nil {
				return err
			}
		default:
			return nil // devices, FIFOs, sockets: left out
		}
		if o.Overlay {
			if err := copyOverlayXattrs(p, out); err != nil {
				return err
			}
		}
		if o.UID >= 0 {
			return os.Lchown(out, o.UID, o.UID)
		}
		return nil
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(mode); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyOverlayXattrs copies the user.overlay.* attributes of src to dst.
func copyOverlayXattrs(src, dst string) error {
	buf := make([]byte, 4096)
	n, err := unix.Llistxattr(src, buf)
	if err != nil || n == 0 {
		return nil // none, or a filesystem without them
	}
	for _, name := range strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00") {
		if !strings.HasPrefix(name, "user.overlay.") {
			continue
		}
		val := make([]byte, 4096)
		vn, err := unix.Lgetxattr(src, name, val)
		if err != nil {
			return err
		}
		if err := unix.Lsetxattr(dst, name, val[:vn], 0); err != nil {
			return err
		}
	}
	return nil
}
