package safefs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// errReader yields data, then fails (and runs hook before failing).
type errReader struct {
	data []byte
	hook func()
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) > 0 {
		n := copy(p, r.data)
		r.data = r.data[n:]
		return n, nil
	}
	if r.hook != nil {
		r.hook()
		return 0, nil
	}
	return 0, errors.New("source failed")
}

func TestAtomicWrite(t *testing.T) {
	u, home := userHome(t)
	f := newFS(t, Options{Privileged: true})
	ctx := context.Background()
	if _, err := f.WriteFile(ctx, u, "f", strings.NewReader("old"), 0o600, map[string]string{"a": "1"}); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(home, "f"))
		if err != nil || string(b) != "old" {
			t.Errorf("%s: content %q, %v", what, b, err)
		}
		if tf := tempFiles(t, home); len(tf) != 0 {
			t.Errorf("%s: temp files left: %v", what, tf)
		}
	}
	half := bytes.Repeat([]byte("n"), 512<<10)
	_, err := f.WriteFile(ctx, u, "f", &errReader{data: half}, 0, nil)
	var pe *PathError
	if !errors.As(err, &pe) || pe.Reason != "source" {
		t.Errorf("failing reader: %v", err)
	}
	check("failing reader")

	cctx, cancel := context.WithCancel(ctx)
	_, err = f.WriteFile(cctx, u, "f", &errReader{data: half, hook: cancel}, 0, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
	check("canceled")

	if _, err := f.WriteFile(ctx, u, "f", strings.NewReader("x"), 0, map[string]string{"BAD": "1"}); !errors.Is(err, ErrInvalidMetadata) {
		t.Errorf("bad metadata: %v", err)
	}
	check("bad metadata")

	// A successful rewrite keeps the mode (mode 0) and replaces metadata.
	e, err := f.WriteFile(ctx, u, "f", strings.NewReader("new"), 0, map[string]string{"b": "2"})
	if err != nil {
		t.Fatal(err)
	}
	if e.Perm != "-rw-------" || len(e.Metadata) != 1 || e.Metadata["b"] != "2" || e.UID != testUID {
		t.Errorf("rewrite entry: %+v", e)
	}
	if tf := tempFiles(t, home); len(tf) != 0 {
		t.Errorf("rewrite (by exchange) left temp files: %v", tf)
	}
	s, err := f.Stat(ctx, u, "f")
	if err != nil || len(s.Metadata) != 1 || s.Metadata["b"] != "2" {
		t.Errorf("Stat metadata: %+v %v", s.Metadata, err)
	}
	rc, re, err := f.ReadFile(ctx, u, "f")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "new" || re.Metadata["b"] != "2" {
		t.Errorf("ReadFile: %q %+v", b, re.Metadata)
	}
	if _, _, err := f.ReadFile(ctx, u, "."); !errors.Is(err, ErrNotRegular) {
		t.Errorf("ReadFile(dir): %v", err)
	}
	if _, err := f.WriteFile(ctx, u, ".", strings.NewReader("x"), 0, nil); !errors.Is(err, ErrIsDir) {
		t.Errorf("WriteFile(dir): %v", err)
	}
}

func TestDiskReserve(t *testing.T) {
	if !inMountNS(t) {
		return
	}
	u, home := userHome(t)
	mnt := filepath.Join(home, "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	mountAt(t, "tmpfs", mnt, "tmpfs", 0, "size=8m,mode=0755,uid=1000,gid=1000")
	f := newFS(t, Options{Privileged: true, DiskReserve: 4 << 20})
	ctx := context.Background()
	if _, err := f.WriteFile(ctx, u, "small/one", bytes.NewReader(make([]byte, 1<<20)), 0, nil); err != nil {
		t.Fatalf("1 MiB write: %v", err)
	}
	_, err := f.WriteFile(ctx, u, "small/five", bytes.NewReader(make([]byte, 5<<20)), 0, nil)
	var pe *PathError
	if !errors.Is(err, ErrDiskReserve) || !errors.As(err, &pe) || pe.Reason != "disk_reserve" {
		t.Fatalf("5 MiB write: %v, want ErrDiskReserve", err)
	}
	des, _ := os.ReadDir(mnt)
	if len(des) != 1 || des[0].Name() != "one" {
		t.Errorf("left behind: %v", des)
	}
	// Replacing "one" with too much data keeps the old file.
	if _, err := f.WriteFile(ctx, u, "small/one", bytes.NewReader(make([]byte, 5<<20)), 0, nil); !errors.Is(err, ErrDiskReserve) {
		t.Errorf("overwrite: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(mnt, "one")); err != nil || fi.Size() != 1<<20 {
		t.Errorf("old file changed: %v %v", fi, err)
	}
	if tf := tempFiles(t, mnt); len(tf) != 0 {
		t.Errorf("temp files: %v", tf)
	}
}

// TestReplaceUndoesADirectorySwap: when a directory takes the file's place
// between the checks and the exchange, the exchange is undone and the
// write fails with ErrIsDir; nothing is lost.
func TestReplaceUndoesADirectorySwap(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "target"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "target", "keep"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, tempPrefix+"x"), []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	if err := replace(dfd, tempPrefix+"x", "target", true); !errors.Is(err, ErrIsDir) {
		t.Fatalf("replace over a directory = %v, want ErrIsDir", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "target", "keep")); err != nil || string(b) != "k" {
		t.Fatalf("the directory was not put back: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, tempPrefix+"x")); err != nil || string(b) != "new" {
		t.Fatalf("the new file was lost: %q %v", b, err)
	}
	// A missing target falls back to a plain rename.
	if err := replace(dfd, tempPrefix+"x", "fresh", true); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "fresh")); err != nil || string(b) != "new" {
		t.Fatalf("fresh: %q %v", b, err)
	}
}

// The disk reserve is at most half of the file system: a 16 MiB tmpfs
// under a 256 MiB reserve is writable up to half.
func TestDiskReserveSmallFS(t *testing.T) {
	if !inMountNS(t) {
		return
	}
	u, home := userHome(t)
	mnt := filepath.Join(home, "small")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	mountAt(t, "tmpfs", mnt, "tmpfs", 0, "size=16m,mode=0755,uid=1000,gid=1000")
	f := newFS(t, Options{Privileged: true})
	ctx := context.Background()
	if _, err := f.WriteFile(ctx, u, "small/one", strings.NewReader(strings.Repeat("x", 4<<20)), 0, nil); err != nil {
		t.Fatalf("4 MiB on 16 MiB: %v", err)
	}
	if _, err := f.WriteFile(ctx, u, "small/two", strings.NewReader(strings.Repeat("x", 5<<20)), 0, nil); !errors.Is(err, ErrDiskReserve) {
		t.Fatalf("9 MiB on 16 MiB: %v, want ErrDiskReserve", err)
	}
}
