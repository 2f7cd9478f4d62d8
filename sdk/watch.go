package rayito

import (
	"context"
	"errors"
	"io"
	"sync"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/sdk/internal/follow"
)

// FileEvent is one change under a watched directory, or a Resynced mark.
type FileEvent struct {
	// Name is relative to the watched directory.
	Name string
	// Op is "create", "write", "remove", "rename" or "chmod" ("" for a
	// Resynced mark).
	Op string
	// Entry is set when the watch asked for entries and the file still
	// exists.
	Entry *Entry
	// Resynced marks a watch that lost its stream (a pause, a dropped
	// connection) and was armed again: changes in between were NOT
	// reported (rayd cannot replay them), so rescan what matters. A
	// Resynced event carries no change: Name, Op and Entry are empty.
	Resynced bool
}

type watchConfig struct {
	recursive bool
	entries   bool
	user      string
}

// watchOption is a WatchOption made of a function.
type watchOption func(*watchConfig)

func (f watchOption) applyWatch(c *watchConfig) { f(c) }

// Recursive also watches subdirectories, including ones created later.
func Recursive() WatchOption { return watchOption(func(c *watchConfig) { c.recursive = true }) }

// WithEntries attaches each changed file's Entry to its event.
func WithEntries() WatchOption { return watchOption(func(c *watchConfig) { c.entries = true }) }

// Watcher delivers the events of one watched directory. When its stream
// is cut (the sandbox paused, a connection dropped) it waits for the
// sandbox as commands do (package documentation, "Reconnecting": a paused
// sandbox is waited for, never woken), arms the watch again and reports a
// FileEvent with Resynced set.
type Watcher struct {
	sbx    *Sandbox
	req    *raydv1.WatchDirRequest
	ctx    context.Context
	cancel context.CancelFunc
	r      *follow.Reconnect

	mu     sync.Mutex
	stream *connect.ServerStreamForClient[raydv1.WatchDirResponse]
	// err is the error that ended the watcher, returned from then on.
	err error
}

// Watch starts watching dir. It returns once the watch is armed: every
// change after that is reported. The watch lasts until Close or until ctx
// ends.
func (f *Files) Watch(ctx context.Context, dir string, opts ...WatchOption) (*Watcher, error) {
	c := &watchConfig{}
	for _, o := range opts {
		if o != nil {
			o.applyWatch(c)
		}
	}
	req := &raydv1.WatchDirRequest{Path: dir, Recursive: c.recursive, IncludeEntry: c.entries}
	if c.user != "" {
		req.User = &raydv1.User{Username: c.user}
	}
	sctx, cancel := context.WithCancel(ctx)
	w := &Watcher{sbx: f.sbx, req: req, ctx: sctx, cancel: cancel, r: f.sbx.newReconnect()}
	stream, err := w.open()
	if err != nil {
		cancel()
		return nil, rpcErr("watch", err)
	}
	w.stream = stream
	return w, nil
}

// open starts a watch stream and reads its WatchStarted.
func (w *Watcher) open() (*connect.ServerStreamForClient[raydv1.WatchDirResponse], error) {
	stream, err := w.sbx.dp.fs.WatchDir(w.ctx, connect.NewRequest(w.req))
	if err != nil {
		return nil, err
	}
	first, err := follow.Open(stream)
	if err != nil {
		return nil, err
	}
	if first.GetStarted() == nil {
		stream.Close()
		if se := first.GetError(); se != nil {
			return nil, streamErr("watch", se)
		}
		return nil, errors.New("watch did not start")
	}
	return stream, nil
}

var watchOps = map[raydv1.FilesystemEventType]string{
	raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CREATE: "create",
	raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_WRITE:  "write",
	raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_REMOVE: "remove",
	raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_RENAME: "rename",
	raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CHMOD:  "chmod",
}

// Next blocks for the next event. It returns io.EOF after Close (or once
// Watch's ctx ended), a *SandboxEndedError when the sandbox ended, and an
// *RPCError when rayd ended the watch (e.g. reason ReasonOutputTruncated
// when the client fell too far behind) or the sandbox did not answer
// again within the reconnect timeout. After a reconnection it returns a
// FileEvent with Resynced set before the next change.
func (w *Watcher) Next() (FileEvent, error) {
	w.mu.Lock()
	stream, err := w.stream, w.err
	w.mu.Unlock()
	if err != nil {
		return FileEvent{}, err
	}
	ev, cut, err := w.read(stream)
	switch {
	case cut == nil && err == nil:
		return ev, nil
	case cut == nil:
		return FileEvent{}, w.stop(err)
	}
	w.r.Cut(cut)
	for {
		if err := w.r.Await(w.ctx); err != nil {
			if errors.Is(err, errReconnectBudget) {
				err = w.fail(w.r.Last())
			}
			return FileEvent{}, w.stop(err)
		}
		stream, err := w.open()
		if err == nil {
			w.mu.Lock()
			if w.ctx.Err() != nil {
				w.mu.Unlock()
				stream.Close()
				return FileEvent{}, w.stop(io.EOF)
			}
			w.stream = stream
			w.mu.Unlock()
			return FileEvent{Resynced: true}, nil
		}
		if w.ctx.Err() != nil || !follow.Resumable(err) {
			return FileEvent{}, w.stop(w.fail(err))
		}
		w.r.Cut(err)
	}
}

// read reads stream up to its next event (returned, with a nil cut and
// err) or its end: a nil cut and the error that ends the watcher, or the
// error that cut it (cut) when a new stream may get further.
func (w *Watcher) read(stream *connect.ServerStreamForClient[raydv1.WatchDirResponse]) (ev FileEvent, cut, err error) {
	for stream.Receive() {
		m := stream.Msg()
		if se := m.GetError(); se != nil {
			if se.GetCode() == string(ReasonSuspending) {
				stream.Close()
				return FileEvent{}, errSuspendingStream, nil
			}
			return FileEvent{}, nil, streamErr("watch", se)
		}
		if fe := m.GetFilesystem(); fe != nil {
			w.r.Progress()
			return FileEvent{Name: fe.GetName(), Op: watchOps[fe.GetType()], Entry: entryOf(fe.GetEntry())}, nil, nil
		}
		if m.GetKeepalive() != nil {
			w.r.Progress()
		}
	}
	err = stream.Err()
	stream.Close()
	switch {
	case w.ctx.Err() != nil || err == nil || connect.CodeOf(err) == connect.CodeCanceled:
		return FileEvent{}, nil, io.EOF
	case !follow.Resumable(err):
		return FileEvent{}, nil, w.fail(err)
	}
	return FileEvent{}, err, nil
}

// fail is the watcher's last word on err: the sandbox's end when the
// control plane says it ended, else err as an *RPCError (io.EOF once
// closed).
func (w *Watcher) fail(err error) error {
	if w.ctx.Err() != nil {
		return io.EOF
	}
	var re *RPCError
	if errors.As(err, &re) {
		return err
	}
	if end := w.sbx.endOf(w.ctx); end != nil {
		return end
	}
	return rpcErr("watch", err)
}

// stop records err (not nil) as the watcher's end and returns it; a
// closed watcher ends with io.EOF.
func (w *Watcher) stop(err error) error {
	if w.ctx.Err() != nil {
		err = io.EOF
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
	return w.err
}

// Close stops watching.
func (w *Watcher) Close() error {
	w.cancel()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stream.Close()
}

// streamErr turns an in-stream StreamError into an *RPCError (code
// Aborted: the stream ended early; the reason from its closed code).
func streamErr(op string, se *raydv1.StreamError) error {
	reason := Reason(se.GetCode())
	switch reason {
	case "deadline_exceeded":
		reason = ReasonTimeout
	case "cancelled":
		reason = ReasonCanceled
	case ReasonNotFound, ReasonPermissionDenied, ReasonInvalidArgument, ReasonUnimplemented, ReasonOutputTruncated,
		ReasonInternal, ReasonResourceExhausted:
	default:
		reason = ReasonInternal
	}
	msg := se.GetMessage()
	if msg == "" {
		msg = se.GetCode()
	}
	return &RPCError{Op: op, Code: CodeAborted, Reason: reason, Message: msg}
}
