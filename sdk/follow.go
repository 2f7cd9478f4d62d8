package rayito

import (
	"context"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// streamShape tells the follower how to read one kind of output stream
// (process, PTY, and later code execution): which messages carry output
// and their seq, and which one is the end. Every other message (start,
// keepalive) is skipped.
type streamShape[M any] struct {
	// seq returns the sequence number of an output message, and false for
	// any other message.
	seq func(*M) (uint64, bool)
	// end returns the end of the stream, or nil.
	end func(*M) *raydv1.EndEvent
}

// Reattach policy: up to maxReattach new streams per follower, the n-th
// after n×reattachDelay.
const (
	maxReattach   = 5
	reattachDelay = 200 * time.Millisecond
)

// follower follows one resumable output stream of rayd to its end. When
// the connection drops before the end (a proxy reset, a suspend and
// resume) it reattaches from the last seq it delivered plus one, drops
// what rayd replays twice, and delivers every output message once and in
// order. It is shared by Commands and Pty.
type follower[M any] struct {
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

// run reads stream, and the streams it reattaches, until the end, which it
// returns; or until it gives up, returning an *RPCError (or ctx's error).
// It closes every stream it reads.
func (f *follower[M]) run(ctx context.Context, stream *connect.ServerStreamForClient[M]) (*raydv1.EndEvent, error) {
	for attempt := 1; ; attempt++ {
		end, err := f.consume(stream)
		stream.Close()
		if end != nil {
			return end, nil
		}
		for {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if attempt > maxReattach || !resumable(err) {
				return nil, rpcErr(f.op, err)
			}
			select {
			case <-time.After(time.Duration(attempt) * reattachDelay):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			stream, err = f.attach(ctx, f.last()+1)
			if err == nil {
				break
			}
			attempt++
		}
	}
}

func (f *follower[M]) last() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastSeq
}

// consume reads one stream until its end (returned) or an error.
func (f *follower[M]) consume(stream *connect.ServerStreamForClient[M]) (*raydv1.EndEvent, error) {
	for stream.Receive() {
		m := stream.Msg()
		if seq, ok := f.shape.seq(m); ok {
			f.mu.Lock()
			dup := seq <= f.lastSeq
			if !dup {
				f.lastSeq = seq
			}
			f.mu.Unlock()
			if !dup && f.onData != nil {
				f.onData(m)
			}
			continue
		}
		if end := f.shape.end(m); end != nil {
			drainStream(stream)
			return end, nil
		}
	}
	err := stream.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, err
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
