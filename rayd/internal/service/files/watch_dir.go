package files

import (
	"context"
	"errors"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/limits"
	"github.com/rayito-dev/rayito/rayd/internal/keepalive"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

// Limits of directory watches.
const (
	// MaxWatchStreams bounds the concurrent WatchDir streams of the sandbox.
	MaxWatchStreams = 64
	// MaxWatchDirs bounds the directories one recursive watch covers.
	MaxWatchDirs = 64
	// WatchQueue bounds the events waiting to be sent on one stream.
	WatchQueue = 1024
	// maxWatchDepth bounds how deep a recursive watch descends.
	maxWatchDepth = 16
	// tmpPrefix starts the names of safefs.WriteFile's temporary files.
	tmpPrefix = ".rayito-tmp-"
)

// errWatchExhausted ends a stream whose recursive watch outgrew MaxWatchDirs.
var errWatchExhausted = errors.New("too many watched directories")

// errWatchEnded ends a stream whose watched directory went away.
var errWatchEnded = errors.New("watched directory gone")

// watcher is the state of one WatchDir stream. Only the handler goroutine
// touches it; the reader goroutine only decodes and queues raw events.
type watcher struct {
	s         *Service
	u         safefs.User
	in        *inotify
	root      string // canonical path of the watched directory
	recursive bool
	entries   bool
	rootWD    int32
	dirs      map[int32]string // watch descriptor -> path relative to root
	byRel     map[string]int32
	tmpMoves  map[uint32]bool // cookies of renames away from a temporary name: true when it makes a new file
	// replaced is the name an atomic write just put in place (by exchange
	// with its temporary file). The exchange's other half, the old file
	// moving from that name to the temporary one, comes next: not a change
	// the user made.
	replaced struct {
		wd   int32
		name string
	}
	out *keepalive.Sender[raydv1.WatchDirResponse]
}

// WatchDir streams the changes under a directory: `started` once inotify is
// armed, then events named relative to the watched directory. Errors found
// before arming come as the call's error.
func (s *Service) WatchDir(ctx context.Context, req *connect.Request[raydv1.WatchDirRequest], stream *connect.ServerStream[raydv1.WatchDirResponse]) error {
	return s.Watch(ctx, req.Msg, stream.Send, 0)
}

// Watch is WatchDir over a send function, with a keepalive after interval
// of silence (0: limits.KeepAliveInterval): the E2B envd adapter
// (service/envdfs) shares it.
func (s *Service) Watch(ctx context.Context, msg *raydv1.WatchDirRequest, send func(*raydv1.WatchDirResponse) error, interval time.Duration) error {
	if interval <= 0 {
		interval = limits.KeepAliveInterval
	}
	u, err := s.user(msg.GetUser())
	if err != nil {
		return err
	}
	root, err := s.fs.Resolve(u, msg.GetPath())
	if err != nil {
		return rpcerr.From(err)
	}
	if err := s.requireDir(ctx, u, root); err != nil {
		return err
	}
	if s.watchStreams.Add(1) > MaxWatchStreams {
		s.watchStreams.Add(-1)
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, "too many directory watches")
	}
	defer s.watchStreams.Add(-1)

	in, err := newInotify()
	if err != nil {
		if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) || errors.Is(err, unix.ENOMEM) {
			return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, "too many directory watches")
		}
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "watch failed")
	}
	defer in.Close()

	w := &watcher{
		s: s, u: u, in: in, root: root,
		recursive: msg.GetRecursive(),
		entries:   msg.GetIncludeEntry(),
		dirs:      map[int32]string{},
		byRel:     map[string]int32{},
		tmpMoves:  map[uint32]bool{},
	}
	if w.rootWD, err = w.arm(""); err != nil {
		return watchErr(err)
	}
	if w.recursive {
		if err := w.armTree(ctx); err != nil {
			return err
		}
	}
	// The watch is armed on the canonical path without following a final
	// symbolic link; re-check through the safe walk that the path still is
	// a directory the user may see, on an allowed file system.
	if err := s.requireDir(ctx, u, root); err != nil {
		return err
	}

	var overflowed atomic.Bool
	queue := make(chan rawEvent, WatchQueue)
	go pumpEvents(in, queue, &overflowed)

	w.out = keepalive.Start(interval, send, func() *raydv1.WatchDirResponse {
		return &raydv1.WatchDirResponse{Event: &raydv1.WatchDirResponse_Keepalive{Keepalive: &raydv1.KeepAlive{}}}
	})
	defer w.out.Stop()
	if err := w.out.Send(&raydv1.WatchDirResponse{Event: &raydv1.WatchDirResponse_Started{Started: &raydv1.WatchStarted{}}}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_CANCELED, "canceled")
		case ev, ok := <-queue:
			if !ok {
				if ctx.Err() != nil {
					return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_CANCELED, "canceled")
				}
				if overflowed.Load() {
					return w.streamError("output_truncated", "event queue overflowed; events were lost")
				}
				return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "watch failed")
			}
			err := w.handle(ctx, ev)
			switch {
			case err == nil:
			case errors.Is(err, errWatchExhausted):
				return w.streamError("resource_exhausted", "too many watched directories")
			case errors.Is(err, errWatchEnded):
				return nil
			default:
				return err
			}
		}
	}
}

// armTree arms a watch on every directory under the root (a recursive
// watch), up to maxWatchDepth and MaxWatchDirs.
func (w *watcher) armTree(ctx context.Context) error {
	es, err := w.s.fs.ListDir(ctx, w.u, w.root, maxWatchDepth)
	if err != nil {
		return rpcerr.From(err)
	}
	for _, e := range es {
		if e.Type != safefs.TypeDir {
			continue
		}
		rel, ok := w.rel(e.Path)
		if !ok || hiddenName(rel) {
			continue
		}
		if len(w.dirs) >= MaxWatchDirs {
			return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, "too many watched directories")
		}
		if _, err := w.arm(rel); err != nil && !errors.Is(err, unix.ENOENT) {
			return watchErr(err)
		}
	}
	return nil
}

// pumpEvents reads in's events into queue until in is closed, or until
// the kernel's queue or queue overflows (then overflowed is set); it
// closes queue when it returns.
func pumpEvents(in *inotify, queue chan<- rawEvent, overflowed *atomic.Bool) {
	defer close(queue)
	buf := make([]byte, 64<<10)
	for {
		evs, err := in.read(buf)
		if err != nil {
			return
		}
		for _, ev := range evs {
			if ev.mask&unix.IN_Q_OVERFLOW != 0 {
				overflowed.Store(true)
				return
			}
			select {
			case queue <- ev:
			default:
				overflowed.Store(true)
				return
			}
		}
	}
}

// requireDir checks through safefs, as the user, that the canonical path c
// is a directory.
func (s *Service) requireDir(ctx context.Context, u safefs.User, c string) error {
	e, err := s.fs.Stat(ctx, u, c)
	if err != nil {
		return rpcerr.From(err)
	}
	if e.Type != safefs.TypeDir {
		return rpcerr.Invalid("not a directory")
	}
	return nil
}

// watchErr maps an inotify_add_watch error to a fixed Connect error.
func watchErr(err error) error {
	switch {
	case errors.Is(err, safefs.ErrSymlink):
		// WatchDir does not follow links (Stat, which checked the path
		// first, follows those above the last component).
		return rpcerr.From(err)
	case errors.Is(err, unix.ENOENT):
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no such file or directory")
	case errors.Is(err, unix.ENOTDIR):
		return rpcerr.Invalid("not a directory")
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_PERMISSION_DENIED, "permission denied")
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.ENOMEM):
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, "too many directory watches")
	}
	return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "watch failed")
}

func (w *watcher) streamError(code, msg string) error {
	return w.out.Send(&raydv1.WatchDirResponse{Event: &raydv1.WatchDirResponse_Error{Error: &raydv1.StreamError{Code: code, Message: msg}}})
}

// full returns the canonical path of rel.
func (w *watcher) full(rel string) string {
	if rel == "" {
		return w.root
	}
	return path.Join(w.root, rel)
}

// rel returns p relative to the root.
func (w *watcher) rel(p string) (string, bool) {
	prefix := w.root + "/"
	if w.root == "/" {
		prefix = "/"
	}
	r, ok := strings.CutPrefix(p, prefix)
	return r, ok && r != ""
}

// hiddenName reports whether a relative path names a temporary file.
func hiddenName(rel string) bool {
	return strings.HasPrefix(path.Base(rel), tmpPrefix)
}

// arm adds a watch on the directory rel.
func (w *watcher) arm(rel string) (int32, error) {
	// Through the safe walk, as the user: a parent swapped for a symlink
	// between the checks and the watch is refused.
	wd32, err := w.s.fs.AddWatch(w.u, w.in.fd, w.full(rel), watchMask)
	if err != nil {
		return 0, err
	}
	wd := int32(wd32)
	if old, ok := w.dirs[wd]; ok {
		delete(w.byRel, old)
	}
	w.dirs[wd] = rel
	w.byRel[rel] = wd
	return wd, nil
}

// armNew watches a directory that appeared after the stream started and
// reports what it already holds (events before its watch are otherwise
// lost).
func (w *watcher) armNew(ctx context.Context, rel string) error {
	if strings.Count(rel, "/")+1 > maxWatchDepth {
		return nil
	}
	if _, ok := w.byRel[rel]; ok {
		return nil
	}
	if len(w.dirs) >= MaxWatchDirs {
		return errWatchExhausted
	}
	full := w.full(rel)
	e, err := w.s.fs.Stat(ctx, w.u, full)
	if err != nil || e.Type != safefs.TypeDir {
		return nil
	}
	if _, err := w.arm(rel); err != nil {
		return nil
	}
	es, err := w.s.fs.ListDir(ctx, w.u, full, 1)
	if err != nil {
		return nil
	}
	for _, e := range es {
		child, ok := w.rel(e.Path)
		if !ok || hiddenName(child) {
			continue
		}
		if err := w.emit(ctx, child, raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CREATE); err != nil {
			return err
		}
		if e.Type == safefs.TypeDir {
			if err := w.armNew(ctx, child); err != nil {
				return err
			}
		}
	}
	return nil
}

// drop forgets the watches of rel and everything under it.
func (w *watcher) drop(rel string) {
	for r, wd := range w.byRel {
		if r == rel || strings.HasPrefix(r, rel+"/") {
			w.in.remove(wd)
			delete(w.byRel, r)
			delete(w.dirs, wd)
		}
	}
}

// handle turns one raw event into at most a few stream messages.
func (w *watcher) handle(ctx context.Context, ev rawEvent) error {
	dir, ok := w.dirs[ev.wd]
	if !ok {
		return nil
	}
	if ev.mask&(unix.IN_IGNORED|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_UNMOUNT) != 0 {
		if ev.wd == w.rootWD {
			return errWatchEnded
		}
		if ev.mask&(unix.IN_IGNORED|unix.IN_UNMOUNT) != 0 {
			delete(w.dirs, ev.wd)
			delete(w.byRel, dir)
		}
		return nil
	}
	if ev.name == "" {
		// An event of a watched directory itself. E2B's envd reports a
		// chmod of it (also of a subdirectory of a recursive watch, which
		// its parent's watch reports too) under its own name, "." for the
		// watched directory.
		if ev.mask&unix.IN_ATTRIB != 0 && w.s.fs.Envd() {
			rel := dir
			if rel == "" {
				rel = "."
			}
			return w.emit(ctx, rel, raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CHMOD)
		}
		return nil
	}
	replaced := w.replaced
	w.replaced.name = ""
	if ev.mask&unix.IN_MOVED_FROM != 0 && ev.wd == replaced.wd && ev.name == replaced.name {
		return nil
	}
	if strings.HasPrefix(ev.name, tmpPrefix) {
		if ev.mask&unix.IN_MOVED_FROM != 0 {
			if len(w.tmpMoves) >= WatchQueue {
				clear(w.tmpMoves)
			}
			w.tmpMoves[ev.cookie] = strings.HasPrefix(ev.name, safefs.TempCreates)
		}
		return nil
	}
	rel := ev.name
	if dir != "" {
		rel = dir + "/" + ev.name
	}
	isDir := ev.mask&unix.IN_ISDIR != 0
	var t raydv1.FilesystemEventType
	switch {
	case ev.mask&unix.IN_CREATE != 0:
		t = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CREATE
	case ev.mask&unix.IN_MODIFY != 0:
		t = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_WRITE
	case ev.mask&unix.IN_ATTRIB != 0:
		t = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CHMOD
	case ev.mask&unix.IN_DELETE != 0:
		t = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_REMOVE
	case ev.mask&unix.IN_MOVED_FROM != 0:
		t = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_RENAME
		if isDir {
			w.drop(rel)
		}
	case ev.mask&unix.IN_MOVED_TO != 0:
		t = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CREATE
		if creates, ok := w.tmpMoves[ev.cookie]; ok {
			// An atomic write: its temporary file renamed into place. A
			// new file is a create and then a write (its content, as an
			// in-place write would show it: E2B's SDKs wait for the
			// write); a replaced one a write.
			delete(w.tmpMoves, ev.cookie)
			if creates {
				if err := w.emit(ctx, rel, t); err != nil {
					return err
				}
			} else {
				w.replaced.wd, w.replaced.name = ev.wd, ev.name
			}
			t = raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_WRITE
			if w.s.fs.Envd() {
				return w.envdWrite(ctx, rel, creates)
			}
		}
	default:
		return nil
	}
	if err := w.emit(ctx, rel, t); err != nil {
		return err
	}
	if isDir && w.recursive && ev.mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
		return w.armNew(ctx, rel)
	}
	return nil
}

// envdWrite reports an atomic write into place as E2B's envd's writes
// show up (after a create for a new file): it gives the file to the user
// (chown: a chmod), truncates an existing one (a write) and writes the
// data (a write, when there is any).
func (w *watcher) envdWrite(ctx context.Context, rel string, creates bool) error {
	if err := w.emit(ctx, rel, raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CHMOD); err != nil {
		return err
	}
	if !creates {
		if err := w.emit(ctx, rel, raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_WRITE); err != nil {
			return err
		}
	}
	if e, err := w.s.fs.Stat(ctx, w.u, w.full(rel)); err == nil && e.Size == 0 {
		return nil
	}
	return w.emit(ctx, rel, raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_WRITE)
}

// emit sends one event, with the entry when asked and still available.
func (w *watcher) emit(ctx context.Context, rel string, t raydv1.FilesystemEventType) error {
	fe := &raydv1.FilesystemEvent{Name: rel, Type: t}
	if w.entries && t != raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_REMOVE &&
		t != raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_RENAME {
		if e, err := w.s.fs.Stat(ctx, w.u, w.full(rel)); err == nil {
			fe.Entry = entryInfo(e)
		}
	}
	return w.out.Send(&raydv1.WatchDirResponse{Event: &raydv1.WatchDirResponse_Filesystem{Filesystem: fe}})
}
