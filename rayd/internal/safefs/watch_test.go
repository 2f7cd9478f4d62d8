package safefs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func TestAddWatch(t *testing.T) {
	u, home := userHome(t)
	f := newFS(t, Options{Privileged: true})
	in, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	if err := os.Mkdir(filepath.Join(home, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(filepath.Join(home, "d"), testUID, testUID)
	if wd, err := f.AddWatch(u, in, "d", unix.IN_CREATE|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW); err != nil || wd < 0 {
		t.Fatalf("watch a user directory: %d %v", wd, err)
	}
	// A symlink to a root-only directory is refused, not followed.
	secret := t.TempDir()
	_ = os.Chmod(secret, 0o700)
	if err := os.Symlink(secret, filepath.Join(home, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.AddWatch(u, in, "link", unix.IN_CREATE); !errors.Is(err, ErrSymlink) {
		t.Fatalf("watch through a symlink: %v", err)
	}
	if _, err := f.AddWatch(u, in, "link/x", unix.IN_CREATE); !errors.Is(err, ErrSymlink) {
		t.Fatalf("watch below a symlink: %v", err)
	}
	// The kernel checks the user's permission: a root-only directory
	// outside the deny list cannot be watched.
	if _, err := f.AddWatch(u, in, secret, unix.IN_CREATE); err == nil {
		t.Fatal("watched a root-only directory as the user")
	}
	for _, denied := range []string{"/proc", "/sys", "/proc/1"} {
		if _, err := f.AddWatch(u, in, denied, unix.IN_CREATE); !errors.Is(err, ErrDenied) {
			t.Errorf("watch %s: %v", denied, err)
		}
	}
}
