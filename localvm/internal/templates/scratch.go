package templates

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A build's limits: the memory of its sandbox, and the size of the tmpfs
// its layer is written to (charged to that memory as it is written).
const (
	buildMemory  = 8 << 30
	maxLayerSize = 6 << 30
)

// mountScratch mounts a bounded tmpfs beside layer for a build (the
// launcher's TemplateLayer.Dir in build mode) with layer/context bound
// read-only into it, and returns its path.
func mountScratch(layer string) (string, error) {
	scratch := layer + ".scratch"
	if err := os.Mkdir(scratch, 0o755); err != nil {
		return "", err
	}
	if err := unix.Mount("tmpfs", scratch, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size="+strconv.Itoa(maxLayerSize)); err != nil {
		_ = os.Remove(scratch)
		return "", fmt.Errorf("mounting the scratch tmpfs: %w", err)
	}
	ctxDir := filepath.Join(scratch, "context")
	err := os.Mkdir(ctxDir, 0o755)
	if err == nil {
		err = unix.Mount(filepath.Join(layer, "context"), ctxDir, "", unix.MS_BIND, "")
	}
	if err == nil {
		err = unix.Mount("", ctxDir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
	}
	if err != nil {
		unmountScratch(scratch)
		return "", fmt.Errorf("binding the context: %w", err)
	}
	return scratch, nil
}

// unmountScratch unmounts and removes a scratch space.
func unmountScratch(scratch string) {
	_ = unix.Unmount(filepath.Join(scratch, "context"), unix.MNT_DETACH)
	_ = unix.Unmount(scratch, unix.MNT_DETACH)
	_ = os.RemoveAll(scratch)
}

// copyLayer copies the usr/, opt/ and home/ a build wrote in scratch into
// layer: directories, files, links, overlayfs whiteouts (0/0 character
// devices) and the user.overlay.* attributes that mark opaque directories;
// nothing else. Owners are set afterwards (finishLayer).
func copyLayer(scratch, layer string) error {
	for _, d := range []string{"usr", "opt", "home"} {
		src := filepath.Join(scratch, d)
		if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(scratch, p)
			if err != nil {
				return err
			}
			out := filepath.Join(layer, rel)
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
				if err := copyRegular(p, out, m.Perm()); err != nil {
					return err
				}
			case m&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				if err != nil {
					return err
				}
				return os.Symlink(target, out)
			case m&fs.ModeCharDevice != 0:
				st, ok := info.Sys().(*syscall.Stat_t)
				if !ok || st.Rdev != 0 {
					return nil // only whiteouts
				}
				return unix.Mknod(out, unix.S_IFCHR|0o000, 0)
			default:
				return nil
			}
			return copyOverlayXattrs(p, out)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func copyRegular(src, dst string, mode fs.FileMode) error {
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
	for _, name := range splitNames(buf[:n]) {
		if len(name) < len("user.overlay.") || name[:len("user.overlay.")] != "user.overlay." {
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

func splitNames(b []byte) []string {
	var out []string
	start := 0
	for i, c := range b {
		if c == 0 {
			if i > start {
				out = append(out, string(b[start:i]))
			}
			start = i + 1
		}
	}
	return out
}
