package envdfs

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// WatchDir streams the changes under a directory through rayd's own
// WatchDir (inotify, through the safe file layer): start once the watch
// is armed, then events named relative to the watched directory (with
// the entry when include_entry: its base name and absolute path), and
// keepalives per Keepalive-Ping-Interval. A missing directory is
// not_found. allow_network_mounts changes nothing: rayd's file layer
// refuses the file systems it denies either way.
func (s *Service) WatchDir(ctx context.Context, req *connect.Request[filesystem.WatchDirRequest], stream *connect.ServerStream[filesystem.WatchDirResponse]) error {
	u, err := user(req.Header())
	if err != nil {
		return err
	}
	m := req.Msg
	p, err := s.path(u, m.GetPath())
	if err != nil {
		return err
	}
	send := func(r *raydv1.WatchDirResponse) error {
		var out *filesystem.WatchDirResponse
		switch ev := r.GetEvent().(type) {
		case *raydv1.WatchDirResponse_Started:
			out = &filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Start{Start: &filesystem.WatchDirResponse_StartEvent{}}}
		case *raydv1.WatchDirResponse_Keepalive:
			out = &filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Keepalive{Keepalive: &filesystem.WatchDirResponse_KeepAlive{}}}
		case *raydv1.WatchDirResponse_Filesystem:
			out = &filesystem.WatchDirResponse{Event: &filesystem.WatchDirResponse_Filesystem{Filesystem: event(ev.Filesystem)}}
		case *raydv1.WatchDirResponse_Error:
			// envd has no in-stream error: the stream ends with it.
			return streamError(ev.Error)
		default:
			return nil
		}
		return stream.Send(out)
	}
	err = s.files.Watch(ctx, &raydv1.WatchDirRequest{Path: p, Recursive: m.GetRecursive(), IncludeEntry: m.GetIncludeEntry(), User: u}, send, keepaliveInterval(req.Header()))
	if err != nil {
		return rpcerr.EnvdPath(err, p)
	}
	return nil
}

// event renders a filesystem event.
func event(e *raydv1.FilesystemEvent) *filesystem.FilesystemEvent {
	return &filesystem.FilesystemEvent{Name: e.GetName(), Type: eventType(e.GetType()), Entry: entry(e.GetEntry())}
}

func eventType(t raydv1.FilesystemEventType) filesystem.EventType {
	switch t {
	case raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CREATE:
		return filesystem.EventType_EVENT_TYPE_CREATE
	case raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_WRITE:
		return filesystem.EventType_EVENT_TYPE_WRITE
	case raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_REMOVE:
		return filesystem.EventType_EVENT_TYPE_REMOVE
	case raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_RENAME:
		return filesystem.EventType_EVENT_TYPE_RENAME
	case raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CHMOD:
		return filesystem.EventType_EVENT_TYPE_CHMOD
	}
	return filesystem.EventType_EVENT_TYPE_UNSPECIFIED
}

// streamError turns rayd's in-stream error into the stream's error.
func streamError(e *raydv1.StreamError) error {
	switch e.GetCode() {
	case "output_truncated":
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_OUTPUT_TRUNCATED, e.GetMessage())
	case "resource_exhausted":
		return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_RESOURCE_EXHAUSTED, e.GetMessage())
	}
	return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "watch failed")
}

// keepaliveInterval reads Keepalive-Ping-Interval (seconds); 0 (absent or
// invalid) means the file service's default.
func keepaliveInterval(h http.Header) time.Duration {
	n, err := strconv.Atoi(h.Get("Keepalive-Ping-Interval"))
	if err != nil || n <= 0 {
		return 0
	}
	return min(time.Duration(n)*time.Second, time.Hour)
}
