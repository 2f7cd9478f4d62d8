package fscopy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestTree(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "out")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "d/e"), 0o750))
	must(os.WriteFile(filepath.Join(src, "d/f"), []byte("data"), 0o640))
	must(os.WriteFile(filepath.Join(src, "suid"), []byte("x"), 0o755|fs.ModeSetuid))
	must(os.Chmod(filepath.Join(src, "suid"), 0o4755))
	must(os.Symlink("/etc/passwd", filepath.Join(src, "link")))
	must(syscall.Mkfifo(filepath.Join(src, "fifo"), 0o644))
	must(Tree(src, dst, Options{UID: -1}))
	if b, err := os.ReadFile(filepath.Join(dst, "d/f")); err != nil || string(b) != "data" {
		t.Fatalf("file: %q %v", b, err)
	}
	if fi, _ := os.Stat(filepath.Join(dst, "d/f")); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v", fi.Mode())
	}
	if fi, _ := os.Stat(filepath.Join(dst, "suid")); fi.Mode()&fs.ModeSetuid != 0 {
		t.Errorf("set-id kept: %v", fi.Mode())
	}
	if target, err := os.Readlink(filepath.Join(dst, "link")); err != nil || target != "/etc/passwd" {
		t.Errorf("link: %q %v (kept as a link, never followed)", target, err)
	}
	if _, err := os.Lstat(filepath.Join(dst, "fifo")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a FIFO was copied: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "d/e")); err != nil || !fi.IsDir() {
		t.Errorf("dir: %v", err)
	}
	// Nothing is written through an existing entry of the destination.
	dst2 := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	must(os.WriteFile(victim, []byte("keep"), 0o600))
	must(os.MkdirAll(filepath.Join(dst2, "d"), 0o755))
	must(os.Symlink(victim, filepath.Join(dst2, "d/f")))
	if err := Tree(src, dst2, Options{UID: -1}); err == nil {
		t.Error("copied over an existing link")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("written through a link: %q", b)
	}
	if err := Tree(src, filepath.Join(t.TempDir(), "small"), Options{UID: -1, Limit: 2}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("limit: %v", err)
	}
	if err := Tree(filepath.Join(src, "missing"), filepath.Join(t.TempDir(), "x"), Options{UID: -1}); err != nil {
		t.Errorf("absent source: %v", err)
	}
}
