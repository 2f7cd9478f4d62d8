package files

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/limits"
	"github.com/rayito-dev/rayito/rayd/internal/keepalive"
	"github.com/rayito-dev/rayito/rayd/internal/persist"
	"github.com/rayito-dev/rayito/rayd/internal/persist/archive"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// persistCall is what Checkpoint and Restore share: the request for the
// manager (the sandbox's default user and HOME, its binding, the
// location) and the stream's events.
type persistCall struct {
	out     *keepalive.Sender[raydv1.PersistEvent]
	started bool
}

// persistRequest builds the manager's request from the RPC's location and
// name.
func (s *Service) persistRequest(loc *raydv1.S3Location, name string) (persist.Request, error) {
	if s.persist == nil {
		return persist.Request{}, notBuilt("checkpoints (FilesystemService.Checkpoint and Restore)")
	}
	u, err := s.user(nil)
	if err != nil {
		return persist.Request{}, err
	}
	r := persist.Request{Name: name, User: u, Home: u.Home}
	if p := s.state.Boot().Persist; p != nil {
		b, err := persist.NewBinding(p.Bucket, p.KeyPrefix)
		if err != nil {
			// A binding rayd cannot read binds to nothing reachable.
			b = &persist.Binding{Bucket: "-invalid-"}
		}
		r.Binding = b
	}
	if loc != nil {
		r.HasLocation = true
		r.Bucket, r.Prefix, r.Region = loc.GetBucket(), loc.GetKeyPrefix(), loc.GetRegion()
	}
	return r, nil
}

// start wires a request's callbacks to the stream.
func (c *persistCall) start(r *persist.Request, send func(*raydv1.PersistEvent) error) {
	c.out = keepalive.Start(limits.KeepAliveInterval, send, func() *raydv1.PersistEvent {
		return &raydv1.PersistEvent{Event: &raydv1.PersistEvent_Keepalive{Keepalive: &raydv1.KeepAlive{}}}
	})
	r.Started = func(name string, total int64) {
		c.started = true
		_ = c.out.Send(&raydv1.PersistEvent{Event: &raydv1.PersistEvent_Started{Started: &raydv1.PersistStarted{Name: name, BytesTotal: uint64(max(total, 0))}}})
	}
	r.Progress = func(p persist.Progress) {
		_ = c.out.Send(&raydv1.PersistEvent{Event: &raydv1.PersistEvent_Progress{Progress: &raydv1.PersistProgress{
			BytesDone: uint64(max(p.BytesDone, 0)), FilesDone: p.Files, BytesTotal: uint64(max(p.BytesTotal, 0)),
		}}})
	}
}

// finish sends done, or the error (after `started`, as an `error` event
// too) and returns it as the call's error.
func (c *persistCall) finish(ctx context.Context, res persist.Result, err error) error {
	defer c.out.Stop()
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = ctx.Err()
		}
		ce := persistError(err)
		if c.started {
			_ = c.out.Send(&raydv1.PersistEvent{Event: &raydv1.PersistEvent_Error{Error: &raydv1.StreamError{Code: streamCode(ce.Code()), Message: ce.Message()}}})
		}
		return ce
	}
	k := res.Counts
	return c.out.Send(&raydv1.PersistEvent{Event: &raydv1.PersistEvent_Done{Done: &raydv1.PersistDone{
		Bytes: uint64(max(res.Bytes, 0)), Files: k.Files, Sha256: res.SHA256, DurationMs: uint64(res.Duration / time.Millisecond),
		Directories: k.Directories, Symlinks: k.Symlinks, ContentBytes: k.ContentBytes, Name: res.Name,
		Skipped: &raydv1.PersistSkipped{
			Special: k.Special, HardLinks: k.HardLinks, Unreadable: k.Unreadable, OtherDevice: k.OtherDevice,
			Conflicts: k.Conflicts, Other: k.Other, ModesSanitized: k.ModesSanitized, Changed: k.Changed,
		},
	}}})
}

// persistError maps a checkpoint's or restore's error: the location and
// exclude checks carry fixed messages of their own (they name a field or
// a pattern's index, never a value); the rest goes through rpcerr.
func persistError(err error) *connect.Error {
	if errors.Is(err, persist.ErrInvalidLocation) || errors.Is(err, archive.ErrBadExclude) {
		return rpcerr.Invalid(err.Error())
	}
	var ce *connect.Error
	if errors.As(rpcerr.From(err), &ce) {
		return ce
	}
	return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "internal error")
}

// streamCode is a Connect code as a StreamError code.
func streamCode(c connect.Code) string {
	switch c {
	case connect.CodeCanceled:
		return "cancelled"
	case connect.CodeUnknown:
		return "internal"
	}
	return c.String()
}
