package rayito

import (
	"context"
	"errors"
	"io"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// FileEvent is one change under a watched directory.
type FileEvent struct {
	// Name is relative to the watched directory.
	Name string
	// Op is "create", "write", "remove", "rename" or "chmod".
	Op string
	// Entry is set when the watch asked for entries and the file still
	// exists.
	Entry *Entry
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

// Watcher delivers the events of one watched directory.
type Watcher struct {
	stream *connect.ServerStreamForClient[raydv1.WatchDirResponse]
	cancel context.CancelFunc
}

// Watch starts watching dir. It returns once the watch is armed: every
// change after that is reported. Close the watcher when done.
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
	stream, err := f.sbx.dp.fs.WatchDir(sctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		return nil, rpcErr("watch", err)
	}
	if !stream.Receive() || stream.Msg().GetStarted() == nil {
		err := stream.Err()
		if err == nil {
			err = errors.New("watch did not start")
		}
		cancel()
		stream.Close()
		return nil, rpcErr("watch", err)
	}
	return &Watcher{stream: stream, cancel: cancel}, nil
}

var watchOps = map[raydv1.FilesystemEventType]string{
	raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CREATE: "create",
	raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_WRITE:  "write",
	raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_REMOVE: "remove",
	raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_RENAME: "rename",
	raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CHMOD:  "chmod",
}

// Next blocks for the next event. It returns io.EOF after Close, and an
// *RPCError when rayd ended the watch (e.g. reason ReasonOutputTruncated
// when the client fell too far behind).
func (w *Watcher) Next() (FileEvent, error) {
	for w.stream.Receive() {
		m := w.stream.Msg()
		if se := m.GetError(); se != nil {
			return FileEvent{}, streamErr("watch", se)
		}
		if ev := m.GetFilesystem(); ev != nil {
			return FileEvent{Name: ev.GetName(), Op: watchOps[ev.GetType()], Entry: entryOf(ev.GetEntry())}, nil
		}
	}
	if err := w.stream.Err(); err != nil && connect.CodeOf(err) != connect.CodeCanceled {
		return FileEvent{}, rpcErr("watch", err)
	}
	return FileEvent{}, io.EOF
}

// Close stops watching.
func (w *Watcher) Close() error {
	w.cancel()
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
