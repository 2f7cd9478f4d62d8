package apiserver

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/rayd/internal/deadline"
	"github.com/rayito-dev/rayito/rayd/internal/quiesce"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/streamlimit"
)

// holdGate refuses every call but the exempt ones while the sandbox's
// timeout holds it (EXPIRED, RESUME_GRACE): FailedPrecondition with reason
// SANDBOX_TIMEOUT.
type holdGate struct {
	holds  func() bool
	exempt map[string]bool
}

func (g holdGate) check(procedure string) error {
	if g.holds == nil || g.exempt[procedure] || !g.holds() {
		return nil
	}
	return rpcerr.From(deadline.ErrExpired)
}

func (g holdGate) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		if err := g.check(req.Spec().Procedure); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

func (g holdGate) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (g holdGate) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := g.check(conn.Spec().Procedure); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}

func (g holdGate) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.check(r.URL.Path); err != nil {
			rpcerr.WriteHTTP(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// suspendGate admits calls through the quiesce gate: while rayd is
// suspending every call but the exempt ones answers Unavailable with
// reason SUSPENDING, and a stream the suspend cuts ends with that error.
type suspendGate struct {
	g      *quiesce.Gate
	exempt map[string]bool
}

func (g suspendGate) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient || g.g == nil || g.exempt[req.Spec().Procedure] {
			return next(ctx, req)
		}
		ctx, leave, err := g.g.Enter(ctx, quiesce.Unary)
		if err != nil {
			return nil, rpcerr.From(err)
		}
		defer leave()
		return next(ctx, req)
	}
}

func (g suspendGate) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (g suspendGate) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if g.g == nil || g.exempt[conn.Spec().Procedure] {
			return next(ctx, conn)
		}
		ctx, leave, err := g.g.Enter(ctx, quiesce.Stream)
		if err != nil {
			return rpcerr.From(err)
		}
		defer leave()
		err = next(ctx, conn)
		if err != nil && quiesce.Cut(ctx) {
			// Whatever the handler made of its cancelled context, the
			// client learns why: the sandbox is suspending.
			return rpcerr.From(quiesce.ErrSuspending)
		}
		return err
	}
}

// handler admits the plain HTTP endpoints (file transfers) as streams.
func (g suspendGate) handler(next http.Handler) http.Handler {
	if g.g == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.exempt[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		ctx, leave, err := g.g.Enter(r.Context(), quiesce.Stream)
		if err != nil {
			rpcerr.WriteHTTP(w, err)
			return
		}
		defer leave()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// streamGate holds a slot of the sandbox's stream limit for each stream
// (after the token, timeout and suspend gates: a refused caller takes no
// slot) and refuses a stream over it with ResourceExhausted. Unary calls
// pass untouched.
type streamGate struct {
	limit  *streamlimit.Limit
	exempt map[string]bool
}

func (g streamGate) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc { return next }

func (g streamGate) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (g streamGate) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	if g.limit == nil {
		return next
	}
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if g.exempt[conn.Spec().Procedure] {
			return next(ctx, conn)
		}
		release, err := g.limit.Acquire()
		if err != nil {
			return rpcerr.From(err)
		}
		defer release()
		return next(ctx, conn)
	}
}

// handler counts the plain HTTP endpoints (file transfers) as streams.
func (g streamGate) handler(next http.Handler) http.Handler {
	if g.limit == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.exempt[r.URL.Path] {
			next.ServeHTTP(w, r)
			return
		}
		release, err := g.limit.Acquire()
		if err != nil {
			rpcerr.WriteHTTP(w, err)
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}
