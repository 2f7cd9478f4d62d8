package launcher

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// sudoStateFile is this binary's copy (or hard link) in the state
// directory, which each sandbox's launcher directory links to as
// sudoLink: the init binds it at /usr/local/bin/sudo (setupSandboxBin).
// The binary itself cannot be bound there: the init's /proc/self/exe
// belongs to the launcher's mount namespace, and its path may not be
// reachable from the sandbox's user namespace (a binary under /root).
const (
	sudoStateFile = "rayito-sudo"
	sudoLink      = "sudo"
)

// sudoBinary is the path of this binary in the state directory, made
// once per launcher: a hard link where the state directory is on the
// binary's filesystem, else a copy. An error is kept: sandboxes then go
// without sudo.
func (l *Launcher) sudoBinary() (string, error) {
	l.sudoOnce.Do(func() {
		l.sudoPath, l.sudoErr = placeBinary(l.exe, l.opts.StateDir)
		if l.sudoErr != nil {
			l.log.Warn("launcher: sandboxes get no sudo", "err", l.sudoErr)
		}
	})
	return l.sudoPath, l.sudoErr
}

// placeBinary puts the executable exe (the sandboxes') at
// dir/sudoStateFile, replacing what is there (a former platform's binary).
func placeBinary(exe, dir string) (string, error) {
	dst := filepath.Join(dir, sudoStateFile)
	tmp := dst + ".tmp-" + strconv.Itoa(os.Getpid())
	_ = os.Remove(tmp)
	err := unix.Linkat(unix.AT_FDCWD, exe, unix.AT_FDCWD, tmp, unix.AT_SYMLINK_FOLLOW)
	if err != nil {
		// Another filesystem (or a binary deleted since it started):
		// copy it.
		if err = copyBinary(exe, tmp); err != nil {
			_ = os.Remove(tmp)
			return "", fmt.Errorf("placing this binary in the state directory: %w", err)
		}
	}
	err = os.Rename(tmp, dst)
	// A rename between two links of one file (dst already is this
	// binary) does nothing and leaves tmp: it goes either way.
	_ = os.Remove(tmp)
	if err != nil {
		return "", err
	}
	return dst, nil
}

func copyBinary(exe, dst string) error {
	src, err := os.Open(exe)
	if err != nil {
		return err
	}
	defer src.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, src)
	if err == nil {
		err = out.Sync()
	}
	return errors.Join(err, out.Close())
}

// linkSudo links this binary into the launcher directory ld, for the
// init to bind as the sandbox's sudo. Without it the sandbox has no sudo.
func (l *Launcher) linkSudo(ld string) {
	src, err := l.sudoBinary()
	if err != nil {
		return
	}
	if err := os.Link(src, filepath.Join(ld, sudoLink)); err != nil {
		l.log.Warn("launcher: a sandbox gets no sudo", "err", err)
	}
}
