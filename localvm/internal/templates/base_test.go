package templates

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestSnapshotUsr(t *testing.T) {
	src := filepath.Join(t.TempDir(), "usr")
	for _, d := range []string{"bin", "lib/x", "share/private"} {
		if err := os.MkdirAll(filepath.Join(src, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "share/private"), 0o750|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "bin/tool"), []byte("v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../bin/tool", filepath.Join(src, "lib/x/link")); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "base")
	n, err := snapshotUsr(src, dst)
	if err != nil {
		t.Fatal(err)
	}
	if n != 8 {
		t.Errorf("%d entries, want 8", n)
	}
	// The same inode: no bytes copied.
	a, _ := os.Stat(filepath.Join(src, "bin/tool"))
	b, err := os.Stat(filepath.Join(dst, "bin/tool"))
	if err != nil || !os.SameFile(a, b) {
		t.Fatalf("bin/tool is not a link of the host's: %v", err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "lib/x/link")); err != nil || l != "../bin/tool" {
		t.Errorf("the symlink: %q %v", l, err)
	}
	if fi, _ := os.Stat(filepath.Join(dst, "share/private")); fi == nil || fi.Mode()&(os.ModePerm|os.ModeSticky) != 0o750|os.ModeSticky {
		t.Errorf("a directory's mode was not kept: %v", fi)
	}
	// The host replaces the file the way package managers do (a new
	// file renamed over it): the snapshot keeps the old one.
	if err := os.WriteFile(filepath.Join(src, "bin/tool.new"), []byte("v2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(src, "bin/tool.new"), filepath.Join(src, "bin/tool")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "bin/tool")); string(got) != "v1" {
		t.Errorf("the snapshot changed with the host: %q", got)
	}
	// Removing the snapshot leaves the host's files alone.
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(src, "bin/tool")); string(got) != "v2" {
		t.Errorf("the host's file: %q", got)
	}
	// An existing destination is refused.
	if err := os.Mkdir(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := snapshotUsr(src, dst); !errors.Is(err, os.ErrExist) {
		t.Errorf("an existing destination: %v", err)
	}
}

func TestSnapshotUsrCrossDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := syscall.Mount("tmpfs", other, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("no tmpfs: %v", err)
	}
	defer syscall.Unmount(other, syscall.MNT_DETACH)
	if _, err := snapshotUsr(src, filepath.Join(other, "base")); !errors.Is(err, errBaseCrossDevice) {
		t.Fatalf("got %v, want errBaseCrossDevice", err)
	}
}
