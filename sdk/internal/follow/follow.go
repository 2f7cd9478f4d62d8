// Package follow is the SDK's one stream follower: it reads a resumable
// output stream of rayd (a process's, a terminal's, a code cell's) to its
// end, reattaching after a cut from the last sequence number it delivered
// and dropping what rayd replays twice, so every output message is
// delivered once and in order. How to wait for the sandbox between
// streams, and what a failure finally is, come from the root package
// (Env); this package knows nothing of it.
package follow

import (
	"context"
	"errors"
	"io"
	"sync"

	"connectrpc.com/connect"
)

// Shape tells the follower how to read one kind of output stream: which
// messages carry output and their seq, and which one is the end. Every
// other message (start, keepalive) is skipped.
type Shape[M any] struct {
	// Seq returns the sequence number of an output message, and false for
	// any other message.
	Seq func(*M) (uint64, bool)
	// End reports whether the message ends the stream (checked first).
	End func(*M) bool
	// Cut reports whether an end only says that the stream was cut (an
	// older rayd's end status "suspending"): the follower reattaches.
	// nil: never.
	Cut func(*M) bool
	// Keepalive reports whether the message is a keepalive.
	Keepalive func(*M) bool
}

// ErrBudget is what Reconnector.Await returns when the sandbox runs but
// did not answer within the reconnect budget.
var ErrBudget = errors.New("the sandbox did not answer within the reconnect timeout")

// ErrSuspending stands for a stream rayd ended with the status (or
// in-stream code) "suspending" rather than the UNAVAILABLE error.
var ErrSuspending = connect.NewError(connect.CodeUnavailable, errors.New("the sandbox is being paused"))

// Reconnector is one follower's reconnection: its budget and backoff.
type Reconnector interface {
	// Progress resets the budget and the backoff: the stream delivered
	// something new.
	Progress()
	// Cut records the error that ended a stream.
	Cut(err error)
	// Await waits until the sandbox can take a new stream: ErrBudget
	// when the budget is spent, another error when the sandbox ended or
	// ctx did.
	Await(ctx context.Context) error
	// Last is the error that cut the last stream.
	Last() error
}

// Env is what a follower needs of the sandbox it follows a stream of.
type Env struct {
	// NewReconnect returns the state of one run's reconnection.
	NewReconnect func() Reconnector
	// Fail is the follower's last word on err: the sandbox's end when it
	// ended, else err as the SDK's error.
	Fail func(ctx context.Context, err error) error
}

// Follower follows one stream of kind M to its end.
type Follower[M any] struct {
	Env   Env
	Shape Shape[M]
	// Attach opens a new stream from fromSeq (ctx is the follower's).
	Attach func(ctx context.Context, fromSeq uint64) (*connect.ServerStreamForClient[M], error)
	// OnData receives each new output message, in seq order.
	OnData func(*M)

	mu      sync.Mutex
	lastSeq uint64
}

// Run reads stream, and the streams it reattaches, until the end message,
// which it returns; or until it gives up (Env.Fail's error, or ctx's). It
// closes every stream it reads.
func (f *Follower[M]) Run(ctx context.Context, stream *connect.ServerStreamForClient[M]) (*M, error) {
	r := f.Env.NewReconnect()
	for {
		end, progressed, err := f.consume(stream)
		stream.Close()
		if end != nil && (f.Shape.Cut == nil || !f.Shape.Cut(end)) {
			return end, nil
		}
		if end != nil {
			err = ErrSuspending
		}
		if progressed {
			r.Progress()
		}
		for {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if !Resumable(err) {
				return nil, f.fail(ctx, err)
			}
			r.Cut(err)
			if werr := r.Await(ctx); werr != nil {
				if errors.Is(werr, ErrBudget) {
					return nil, f.fail(ctx, r.Last())
				}
				return nil, werr
			}
			stream, err = f.Attach(ctx, f.Last()+1)
			if err == nil {
				break
			}
		}
	}
}

func (f *Follower[M]) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return f.Env.Fail(ctx, err)
}

// Last is the last seq delivered.
func (f *Follower[M]) Last() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastSeq
}

// SetLast records seq as delivered (a stream's first message, read before
// Run).
func (f *Follower[M]) SetLast(seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastSeq = seq
}

// consume reads one stream until its end (returned) or an error.
// progressed says it delivered new output or a keepalive.
func (f *Follower[M]) consume(stream *connect.ServerStreamForClient[M]) (end *M, progressed bool, err error) {
	for stream.Receive() {
		m := stream.Msg()
		if f.Shape.End(m) {
			Drain(stream)
			return m, progressed, nil
		}
		if seq, ok := f.Shape.Seq(m); ok {
			f.mu.Lock()
			dup := seq <= f.lastSeq
			if !dup {
				f.lastSeq = seq
			}
			f.mu.Unlock()
			if !dup {
				progressed = true
				if f.OnData != nil {
					f.OnData(m)
				}
			}
			continue
		}
		if f.Shape.Keepalive(m) {
			progressed = true
		}
	}
	err = stream.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, progressed, err
}

// Resumable reports whether a new stream may get further: a dropped or
// reset connection, rayd unavailable for a moment (suspend), a cut
// stream. Not when the process is gone, its output was dropped
// (OutOfRange), or the call is refused.
func Resumable(err error) bool {
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

// Open reads the first message of a new stream and returns it, or the
// stream's error.
func Open[M any](stream *connect.ServerStreamForClient[M]) (*M, error) {
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

// Drain reads what follows the last event of a stream (its end message)
// so that the response body reaches EOF: on HTTP/1.1 a body closed early
// costs its connection, and the next call dials again. A server that
// keeps talking is cut after a few messages.
func Drain[T any](s *connect.ServerStreamForClient[T]) {
	for i := 0; i < 4 && s.Receive(); i++ {
	}
}
