// Package quiesce is the suspend gate of rayd's API: it tracks the calls in
// flight and, when the platform announces a snapshot (/suspend), refuses new
// ones, cuts the open streams and lets the rest drain.
//
// Every call enters the [Gate] first ([Gate.Enter]). While the gate is
// closed Enter fails with [ErrSuspending] (rpcerr maps it to Unavailable
// with reason SUSPENDING). A stream's context is derived from the gate's
// broadcast: [Gate.Close] cancels it with the cause ErrSuspending, so its
// handler returns and the caller answers the cut as SUSPENDING ([Cut]
// tells). Nothing else is stopped: processes keep running and their output
// keeps accumulating in their replay rings, so a client resumes from
// from_seq after the resume. Calls that are not streams are not cut; the
// suspend waits for them for a bounded time ([Gate.Wait]).
package quiesce

import (
	"context"
	"errors"
	"sync"
)

// ErrSuspending refuses a call while the gate is closed, and is the cause
// of a stream cut by Close.
var ErrSuspending = errors.New("quiesce: rayd is suspending")

// Kind tells streams, which Close cuts, from the calls it waits for.
type Kind int

// Kinds of calls.
const (
	Unary  Kind = iota + 1 // unary RPCs: waited for
	Stream                 // streaming RPCs and transfers: cut
)

// Gate is the suspend gate. The zero value is an open gate.
type Gate struct {
	mu      sync.Mutex
	closed  bool
	calls   map[*call]struct{}
	changed chan struct{} // closed (and replaced) whenever a call leaves
}

type call struct {
	kind   Kind
	cancel context.CancelCauseFunc // streams only
}

// Enter admits a call of kind k, or returns ErrSuspending while the gate is
// closed. For a stream, the returned context is cancelled with the cause
// ErrSuspending when the gate closes; for a unary call it is ctx itself.
// The call must call leave, once, when it is done.
func (g *Gate) Enter(ctx context.Context, k Kind) (_ context.Context, leave func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ctx, func() {}, ErrSuspending
	}
	c := &call{kind: k}
	if k == Stream {
		ctx, c.cancel = context.WithCancelCause(ctx)
	}
	if g.calls == nil {
		g.calls = make(map[*call]struct{})
	}
	g.calls[c] = struct{}{}
	var once sync.Once
	return ctx, func() { once.Do(func() { g.leave(c) }) }, nil
}

func (g *Gate) leave(c *call) {
	if c.cancel != nil {
		c.cancel(context.Canceled)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.calls, c)
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// Close closes the gate: new calls fail with ErrSuspending and every open
// stream is cut. It returns the number of streams cut (0 when the gate was
// already closed).
func (g *Gate) Close() (cut int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0
	}
	g.closed = true
	for c := range g.calls {
		if c.kind == Stream {
			c.cancel(ErrSuspending)
			cut++
		}
	}
	return cut
}

// Open reopens the gate.
func (g *Gate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = false
}

// Closed reports whether the gate is closed.
func (g *Gate) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Wait waits until no call of kind k is in flight, or ctx is done; it
// reports whether none is left.
func (g *Gate) Wait(ctx context.Context, k Kind) bool {
	for {
		g.mu.Lock()
		n := 0
		for c := range g.calls {
			if c.kind == k {
				n++
			}
		}
		if n == 0 {
			g.mu.Unlock()
			return true
		}
		if g.changed == nil {
			g.changed = make(chan struct{})
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// InFlight returns the number of calls of kind k in flight.
func (g *Gate) InFlight(k Kind) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for c := range g.calls {
		if c.kind == k {
			n++
		}
	}
	return n
}

// Cut reports whether ctx, from Enter, was cut by Close.
func Cut(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrSuspending)
}
