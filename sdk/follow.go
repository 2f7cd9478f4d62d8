package rayito

import (
	"context"
	"errors"
	"io"
	"sync"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// streamShape tells the follower how to read one kind of output stream
// (process, PTY, code execution): which messages carry output and their
// seq, and which one is the end. Every other message (start, keepalive) is
// skipped.
type streamShape[M any] struct {
	// seq returns the sequence number of an output message, and false for
	// any other message.
	seq func(*M) (uint64, bool)
	// end reports whether the message ends the stream (checked first).
	end func(*M) bool
	// cut reports whether an end only says that the stream was cut (an
	// older rayd's end status "suspending"): the follower reattaches.
	// nil: never.
	cut func(*M) bool
	// keepalive reports whether the message is a keepalive.
	keepalive func(*M) bool
}

// endEvent reads the EndEvent of process and PTY streams.
func endEvent(e *raydv1.EndEvent) (end, cut bool) {
	return e != nil, e.GetStatus() == "suspending"
}

// follower follows one resumable output stream of rayd to its end. It is
// shared by Commands and Pty. When the stream is cut before the end (a
// pause, a proxy reset, a dropped connection) it waits for the sandbox as
// awaitReachable says (the control plane first: a paused sandbox is only
// waited for, never woken), then reattaches from the last seq it
// delivered plus one and drops what rayd replays twice, so every output
// message is delivered once and in order. A sandbox that ended under it
// is a *SandboxEndedError.
type follower[M any] struct {
	sbx   *Sandbox
	shape streamShape[M]
	// attach opens a new stream from fromSeq (ctx is the follower's).
	attach func(ctx context.Context, fromSeq uint64) (*connect.ServerStreamForClient[M], error)
	// onData receives each new output message, in seq order.
	onData func(*M)
	// op names the stream in errors ("follow", "pty").
	op string

	mu      sync.Mutex
	lastSeq uint64
}

// run reads stream, and the streams it reattaches, until the end message,
// which it returns; or until it gives up: a *SandboxEndedError when the
// sandbox ended, an *RPCError when rayd refused the stream or did not
// answer within the reconnect budget, or ctx's error. It closes every
// stream it reads.
func (f *follower[M]) run(ctx context.Context, stream *connect.ServerStreamForClient[M]) (*M, error) {
	r := newReconnect(&f.sbx.cfg.timings)
	for {
		end, progressed, err := f.consume(stream)
		stream.Close()
		if end != nil && (f.shape.cut == nil || !f.shape.cut(end)) {
			return end, nil
		}
		if end != nil {
			err = errSuspendingStream
		}
		if progressed {
			r.progress()
		}
		for {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !resumable(err) {
				return nil, f.fail(ctx, err)
			}
			r.cut(err)
			if werr := f.sbx.awaitReachable(ctx, &r); werr != nil {
				if errors.Is(werr, errReconnectBudget) {
					return nil, f.fail(ctx, r.last)
				}
				return nil, werr
			}
			stream, err = f.attach(ctx, f.last()+1)
			if err == nil {
				break
			}
		}
	}
}

// fail is the follower's last word on err: the sandbox's end when the
// control plane says it ended (asked once), else err as an *RPCError.
func (f *follower[M]) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if end := f.sbx.endOf(ctx); end != nil {
		return end
	}
	return rpcErr(f.op, err)
}

func (f *follower[M]) last() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastSeq
}

// consume reads one stream until its end (returned) or an error.
// progressed says it delivered new output or a keepalive.
func (f *follower[M]) consume(stream *connect.ServerStreamForClient[M]) (end *M, progressed bool, err error) {
	for stream.Receive() {
		m := stream.Msg()
		if f.shape.end(m) {
			drainStream(stream)
			return m, progressed, nil
		}
		if seq, ok := f.shape.seq(m); ok {
			f.mu.Lock()
			dup := seq <= f.lastSeq
			if !dup {
				f.lastSeq = seq
			}
			f.mu.Unlock()
			if !dup {
				progressed = true
				if f.onData != nil {
					f.onData(m)
				}
			}
			continue
		}
		if f.shape.keepalive(m) {
			progressed = true
		}
	}
	err = stream.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, progressed, err
}

// resumable reports whether a new stream may get further: a dropped or
// reset connection, rayd unavailable for a moment (suspend), a cut
// stream. Not when the process is gone, its output was dropped
// (OutOfRange), or the call is refused.
func resumable(err error) bool {
	if err == nil {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeNotFound, connect.CodeOutOfRange, connect.CodeUnauthenticated, connect.CodePermissionDenied,
		connect.CodeInvalidArgument, connect.CodeFailedPrecondition, connect.CodeUnimplemented:
		return false
	}
	return true
}

// openStream reads the first message of a new stream and returns it, or
// the stream's error.
func openStream[M any](stream *connect.ServerStreamForClient[M]) (*M, error) {
	if !stream.Receive() {
		err := stream.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		stream.Close()
		return nil, err
	}
	return stream.Msg(), nil
}
