package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
)

type watchStream struct {
	t      *testing.T
	s      *connect.ServerStreamForClient[raydv1.WatchDirResponse]
	msgs   chan *raydv1.WatchDirResponse
	done   chan error
	seen   []*raydv1.FilesystemEvent
	cancel context.CancelFunc
}

// startWatch opens a WatchDir stream and requires `started` first.
func startWatch(t *testing.T, c raydv1connect.FilesystemServiceClient, req *raydv1.WatchDirRequest) *watchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := c.WatchDir(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Receive() {
		t.Fatalf("no first message: %v", s.Err())
	}
	if s.Msg().GetStarted() == nil {
		t.Fatalf("first message %v, want started", s.Msg())
	}
	w := &watchStream{t: t, s: s, msgs: make(chan *raydv1.WatchDirResponse, 4096), done: make(chan error, 1), cancel: cancel}
	go func() {
		for s.Receive() {
			w.msgs <- s.Msg()
		}
		w.done <- s.Err()
		close(w.msgs)
	}()
	return w
}

// waitFor reads events until one has the name and type.
func (w *watchStream) waitFor(name string, types ...raydv1.FilesystemEventType) *raydv1.FilesystemEvent {
	w.t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m, ok := <-w.msgs:
			if !ok {
				w.t.Fatalf("stream ended waiting for %s %v; seen %v", name, types, w.seen)
			}
			ev := m.GetFilesystem()
			if ev == nil {
				if m.GetError() != nil {
					w.t.Fatalf("stream error %v", m.GetError())
				}
				continue
			}
			w.seen = append(w.seen, ev)
			if ev.GetName() == name {
				for _, typ := range types {
					if ev.GetType() == typ {
						return ev
					}
				}
			}
		case <-timeout:
			w.t.Fatalf("timeout waiting for %s %v; seen %v", name, types, w.seen)
		}
	}
}

const (
	evCreate = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CREATE
	evWrite  = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_WRITE
	evRemove = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_REMOVE
	evRename = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_RENAME
	evChmod  = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CHMOD
)

func TestWatchDirEvents(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	h := newHarness(t)
	h.run(nil)
	dir := userDir(t)
	fs := h.files()
	w := startWatch(t, fs, &raydv1.WatchDirRequest{Path: dir, IncludeEntry: true})

	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := w.waitFor("a.txt", evCreate)
	if ev.GetEntry().GetName() != "a.txt" {
		t.Fatalf("entry %v", ev.GetEntry())
	}
	w.waitFor("a.txt", evWrite)

	if _, err := writeFiles(context.Background(), fs, upFile{path: dir + "/b.txt", data: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	// A new file by an atomic write: a create, then a write, as an
	// in-place write (a.txt) shows.
	w.waitFor("b.txt", evCreate)
	w.waitFor("b.txt", evWrite)
	// Replacing an existing file exchanges it with the temporary one: still
	// one WRITE, never a RENAME of b.txt.
	if _, err := writeFiles(context.Background(), fs, upFile{path: dir + "/b.txt", data: []byte("again")}); err != nil {
		t.Fatal(err)
	}
	w.waitFor("b.txt", evWrite)
	if err := os.Rename(filepath.Join(dir, "a.txt"), filepath.Join(dir, "c.txt")); err != nil {
		t.Fatal(err)
	}
	w.waitFor("a.txt", evRename)
	w.waitFor("c.txt", evCreate)
	if err := os.Chmod(filepath.Join(dir, "c.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.waitFor("c.txt", evChmod)
	if err := os.Remove(filepath.Join(dir, "c.txt")); err != nil {
		t.Fatal(err)
	}
	w.waitFor("c.txt", evRemove)
	n := 0
	for _, ev := range w.seen {
		if strings.Contains(ev.GetName(), ".rayito-tmp-") || strings.HasPrefix(ev.GetName(), "/") {
			t.Fatalf("bad event name %q", ev.GetName())
		}
		if ev.GetName() == "b.txt" {
			n++
			if ev.GetType() == evRename {
				t.Fatalf("atomic rewrite reported as a rename: %v", w.seen)
			}
		}
	}
	if n != 3 {
		t.Fatalf("two atomic writes (a new file, then a replacement) gave %d events, want create, write, write: %v", n, w.seen)
	}
}

func TestWatchDirRecursive(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	h := newHarness(t)
	h.run(nil)
	dir := userDir(t)
	if err := os.Mkdir(filepath.Join(dir, "pre"), 0o755); err != nil {
		t.Fatal(err)
	}
	w := startWatch(t, h.files(), &raydv1.WatchDirRequest{Path: dir, Recursive: true})
	if err := os.WriteFile(filepath.Join(dir, "pre", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitFor("pre/x", evCreate)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	w.waitFor("sub", evCreate)
	if err := os.WriteFile(filepath.Join(dir, "sub", "f.txt"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.waitFor("sub/f.txt", evCreate)
}

func TestWatchDirErrorsBeforeStarted(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	h := newHarness(t)
	h.run(nil)
	dir := userDir(t)
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
		s, err := h.files().WatchDir(context.Background(), connect.NewRequest(&raydv1.WatchDirRequest{Path: p}))
		if err == nil {
			if s.Receive() {
				t.Fatalf("%s: got message %v before the error", p, s.Msg())
			}
			err = s.Err()
			s.Close()
		}
		if code(err) != want {
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
	requireRoot(t)
	h := newHarness(t)
	h.run(nil)
	dir := userDir(t)
	before := inotifyFDs(t)
	w := startWatch(t, h.files(), &raydv1.WatchDirRequest{Path: dir, Recursive: true})
	if got := inotifyFDs(t); got != before+1 {
		t.Fatalf("inotify fds %d, want %d", got, before+1)
	}
	w.cancel()
	select {
	case <-w.done:
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
