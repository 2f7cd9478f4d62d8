//go:build unix

package template

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestSpecialFiles(t *testing.T) {
	t.Parallel()
	t.Run("fifo", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		writeTree(t, dir, map[string]string{"app/ok": "x"})
		if err := syscall.Mkfifo(filepath.Join(dir, "app/fifo"), 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
		_, err := Compile(t.Context(), FromBaseImage("alpine").Copy("app", "/app"), dir)
		var e *Error
		if !errors.Is(err, ErrSpecialFile) || !errors.As(err, &e) || e.Path != "app/fifo" {
			t.Fatalf("err = %v; want ErrSpecialFile naming app/fifo", err)
		}
		// Excluded, it is no error.
		writeTree(t, dir, map[string]string{IgnoreFile: "app/fifo\n"})
		if _, err := Compile(t.Context(), FromBaseImage("alpine").Copy("app", "/app"), dir); err != nil {
			t.Fatalf("with the fifo excluded: %v", err)
		}
	})
	t.Run("socket", func(t *testing.T) {
		t.Parallel()
		dir, err := os.MkdirTemp("", "rt") // a short path: socket names are limited
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		l, err := net.Listen("unix", filepath.Join(dir, "s"))
		if err != nil {
			t.Skipf("unix socket: %v", err)
		}
		defer l.Close()
		_, err = Compile(t.Context(), FromBaseImage("alpine").Copy(".", "/app"), dir)
		if !errors.Is(err, ErrSpecialFile) {
			t.Fatalf("err = %v; want ErrSpecialFile", err)
		}
	})
	t.Run("device", func(t *testing.T) {
		t.Parallel()
		if os.Geteuid() != 0 {
			t.Skip("making a device node needs root")
		}
		dir := t.TempDir()
		if err := syscall.Mknod(filepath.Join(dir, "null"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
			t.Skipf("mknod: %v", err)
		}
		_, err := Compile(t.Context(), FromBaseImage("alpine").Copy("null", "/dev-null"), dir)
		if !errors.Is(err, ErrSpecialFile) {
			t.Fatalf("err = %v; want ErrSpecialFile", err)
		}
	})
}
