package safefs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A move between two file systems is ErrCrossDevice (EXDEV), which the
// API answers with a message saying so, not an internal error.
func TestMoveCrossDevice(t *testing.T) {
	if !inMountNS(t) {
		return
	}
	u, home := userHome(t)
	for _, d := range []string{"one", "two"} {
		mnt := filepath.Join(home, d)
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		mountAt(t, "tmpfs", mnt, "tmpfs", 0, "size=1m,mode=0755,uid=1000,gid=1000")
	}
	mustWrite(t, filepath.Join(home, "one/f"), "x", 0o640)
	os.Chown(filepath.Join(home, "one/f"), testUID, testUID)
	unix.Setxattr(filepath.Join(home, "one/f"), "user.e2b.k", []byte("v"), 0)
	os.Mkdir(filepath.Join(home, "one/d"), 0o755)
	os.Symlink("f", filepath.Join(home, "one/l"))
	ctx := context.Background()
	plain := newFS(t, Options{Privileged: true})
	_, err := plain.Move(ctx, u, "one/f", "two/f")
	if !errors.Is(err, ErrCrossDevice) || !errors.Is(err, unix.EXDEV) {
		t.Fatalf("Move across file systems: %v, want ErrCrossDevice", err)
	}
	if _, err := os.Stat(filepath.Join(home, "one/f")); err != nil {
		t.Errorf("the source: %v", err)
	}
	// An Envd FS moves a regular file as mv does: copy, then remove.
	f := newFS(t, Options{Privileged: true, Envd: true})
	e, err := f.Move(ctx, u, "one/f", "two/new/f")
	if err != nil || e.Path != home+"/two/new/f" || e.Mode.Perm() != 0o640 || e.Metadata["k"] != "v" {
		t.Fatalf("Envd Move of a file across file systems: %+v, %v", e, err)
	}
	if b, err := os.ReadFile(filepath.Join(home, "two/new/f")); err != nil || string(b) != "x" {
		t.Errorf("the copy: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(home, "one/f")); !os.IsNotExist(err) {
		t.Errorf("the source after the move: %v", err)
	}
	for _, p := range []string{"one/d", "one/l"} {
		if _, err := f.Move(ctx, u, p, "two/x"); !errors.Is(err, ErrCrossDevice) {
			t.Errorf("Envd Move of %s across file systems: %v", p, err)
		}
	}
}
