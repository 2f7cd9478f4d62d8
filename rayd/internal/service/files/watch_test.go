package files_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

const (
	evCreate = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CREATE
	evWrite  = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_WRITE
	evRemove = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_REMOVE
	evRename = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_RENAME
	evChmod  = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CHMOD
)

func TestWatchDirEvents(t *testing.T) {
	t.Parallel()
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	fs := h.Files()
	w := raydtest.StartWatch(t, fs, &raydv1.WatchDirRequest{Path: dir, IncludeEntry: true})

	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := w.WaitFor("a.txt", evCreate)
	if ev.GetEntry().GetName() != "a.txt" {
		t.Fatalf("entry %v", ev.GetEntry())
	}
	w.WaitFor("a.txt", evWrite)

	if _, err := raydtest.WriteFiles(context.Background(), fs, raydtest.UpFile{Path: dir + "/b.txt", Data: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	// A new file by an atomic write: a create, then a write, as an
	// in-place write (a.txt) shows.
	w.WaitFor("b.txt", evCreate)
	w.WaitFor("b.txt", evWrite)
	// Replacing an existing file exchanges it with the temporary one: still
	// one WRITE, never a RENAME of b.txt.
	if _, err := raydtest.WriteFiles(context.Background(), fs, raydtest.UpFile{Path: dir + "/b.txt", Data: []byte("again")}); err != nil {
		t.Fatal(err)
	}
	w.WaitFor("b.txt", evWrite)
	if err := os.Rename(filepath.Join(dir, "a.txt"), filepath.Join(dir, "c.txt")); err != nil {
		t.Fatal(err)
	}
	w.WaitFor("a.txt", evRename)
	w.WaitFor("c.txt", evCreate)
	if err := os.Chmod(filepath.Join(dir, "c.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.WaitFor("c.txt", evChmod)
	if err := os.Remove(filepath.Join(dir, "c.txt")); err != nil {
		t.Fatal(err)
	}
	w.WaitFor("c.txt", evRemove)
	n := 0
	for _, ev := range w.Seen {
		if strings.Contains(ev.GetName(), ".rayito-tmp-") || strings.HasPrefix(ev.GetName(), "/") {
			t.Fatalf("bad event name %q", ev.GetName())
		}
		if ev.GetName() == "b.txt" {
			n++
			if ev.GetType() == evRename {
				t.Fatalf("atomic rewrite reported as a rename: %v", w.Seen)
			}
		}
	}
	if n != 3 {
		t.Fatalf("two atomic writes (a new file, then a replacement) gave %d events, want create, write, write: %v", n, w.Seen)
	}
}

func TestWatchDirRecursive(t *testing.T) {
	t.Parallel()
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	if err := os.Mkdir(filepath.Join(dir, "pre"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := raydtest.StartWatch(t, h.Files(), &raydv1.WatchDirRequest{Path: dir, Recursive: true})
	if err := os.WriteFile(filepath.Join(dir, "pre", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w.WaitFor("pre/x", evCreate)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.WaitFor("sub", evCreate)
	if err := os.WriteFile(filepath.Join(dir, "sub", "f.txt"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.WaitFor("sub/f.txt", evCreate)
}

func TestWatchDirErrorsBeforeStarted(t *testing.T) {
	t.Parallel()
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]connect.Code{
		dir + "/missing": connect.CodeNotFound,
		"/proc":          connect.CodePermissionDenied,
		"/sys":           connect.CodePermissionDenied,
		dir + "/file":    connect.CodeInvalidArgument,
	}
	for p, want := range cases {
		s, err := h.Files().WatchDir(context.Background(), connect.NewRequest(&raydv1.WatchDirRequest{Path: p}))
		if err == nil {
			if s.Receive() {
				t.Fatalf("%s: got message %v before the error", p, s.Msg())
			}
			err = s.Err()
			s.Close()
		}
		if raydtest.CodeOf(err) != want {
			t.Errorf("%s: %v, want %v", p, err, want)
		}
		if err != nil && strings.Contains(err.Error(), dir) {
			t.Errorf("error names the path: %v", err)
		}
	}
}

// inotifyFDs counts this process's inotify descriptors.
func inotifyFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && l == "anon_inode:inotify" {
			n++
		}
	}
	return n
}

// Not parallel: it counts the process's inotify descriptors.
func TestWatchDirCancelClosesInotify(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	dir := raydtest.UserDir(t)
	before := inotifyFDs(t)
	w := raydtest.StartWatch(t, h.Files(), &raydv1.WatchDirRequest{Path: dir, Recursive: true})
	if got := inotifyFDs(t); got != before+1 {
		t.Fatalf("inotify fds %d, want %d", got, before+1)
	}
	w.Cancel()
	select {
	case <-w.Done:
	case <-time.After(time.Second):
		t.Fatal("stream did not end on cancel")
	}
	deadline := time.Now().Add(time.Second)
	for inotifyFDs(t) != before {
		if time.Now().After(deadline) {
			t.Fatalf("inotify fds %d, want %d", inotifyFDs(t), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
