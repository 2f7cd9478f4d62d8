package code

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/jupyter"
)

// Bounds of an execution's replay buffer and retention.
const (
	// bufferBytes and bufferEvents bound the events an execution keeps for
	// Reattach (the newest event is always kept).
	bufferBytes  = 1 << 20
	bufferEvents = 4096
	// retainEnded is how long an ended execution stays reattachable.
	retainEnded = 30 * time.Second
	// maxRetained bounds the ended executions a context keeps.
	maxRetained = 8
	// lagWait is how long a new event waits for a live follower that lags
	// a whole buffer behind before that follower is left to truncation.
	lagWait = 5 * time.Second
)

// execution is one Execute: its events (seq from 1) in a bounded buffer
// that Execute and Reattach follow. It outlives the RPC that started it.
type execution struct {
	id     string
	cancel context.CancelFunc // interrupts the run (client cancel)

	mu        sync.Mutex
	events    []*raydv1.ExecuteEvent
	sizes     []int // proto sizes of events
	bytes     int
	nextSeq   uint64
	ended     bool
	changed   chan struct{} // closed and replaced on every change
	followers map[*uint64]struct{}
}

func newExecution(id string, cancel context.CancelFunc) *execution {
	return &execution{id: id, cancel: cancel, nextSeq: 1, changed: make(chan struct{}), followers: map[*uint64]struct{}{}}
}

// add appends ev with the next seq. It waits (at most lagWait) while a live
// follower lags a whole buffer behind, so a reader that keeps up loses
// nothing; a stalled one is then left to OUTPUT_TRUNCATED.
func (e *execution) add(ev *raydv1.ExecuteEvent, end bool) {
	size := proto.Size(ev)
	e.mu.Lock()
	defer e.mu.Unlock()
	deadline := time.Now().Add(lagWait)
	for e.laggingLocked(e.dropsLocked(size)) && time.Now().Before(deadline) {
		ch := e.changed
		e.mu.Unlock()
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond):
		}
		e.mu.Lock()
	}
	ev.Seq = e.nextSeq
	e.nextSeq++
	e.events = append(e.events, ev)
	e.sizes = append(e.sizes, size)
	e.bytes += size
	for len(e.events) > 1 && (e.bytes > bufferBytes || len(e.events) > bufferEvents) {
		e.bytes -= e.sizes[0]
		e.events[0] = nil
		e.events, e.sizes = e.events[1:], e.sizes[1:]
	}
	if end {
		e.ended = true
	}
	e.broadcastLocked()
}

// dropsLocked returns the highest seq that appending an event of size
// bytes would trim (0: none).
func (e *execution) dropsLocked(size int) uint64 {
	bytes, n, i := e.bytes+size, len(e.events)+1, 0
	for n-i > 1 && (bytes > bufferBytes || n-i > bufferEvents) {
		bytes -= e.sizes[i]
		i++
	}
	if i == 0 {
		return 0
	}
	return e.events[i-1].GetSeq()
}

func (e *execution) broadcastLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// laggingLocked reports whether a live follower has not yet sent the
// event drop (a seq about to be trimmed).
func (e *execution) laggingLocked(drop uint64) bool {
	if drop == 0 {
		return false
	}
	for c := range e.followers {
		if *c <= drop {
			return true
		}
	}
	return false
}

// detached is called when a follower's stream ended before the execution
// did: after grace, if the execution still runs and nobody follows it, it
// is interrupted.
func (e *execution) detached(grace time.Duration) {
	time.AfterFunc(grace, func() {
		e.mu.Lock()
		abandoned := !e.ended && len(e.followers) == 0
		e.mu.Unlock()
		if abandoned {
			e.cancel()
		}
	})
}

// isEnded reports whether the execution's last event is recorded.
func (e *execution) isEnded() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ended
}

// follow sends the events from fromSeq (0: the first held) and then the
// new ones until the end event, or until ctx ends (it then returns
// ctx.Err()). Errors of send end it too.
func (e *execution) follow(ctx context.Context, fromSeq uint64, send func(*raydv1.ExecuteEvent) error) error {
	cursor := new(uint64)
	e.mu.Lock()
	first := e.nextSeq
	if len(e.events) > 0 {
		first = e.events[0].GetSeq()
	}
	if fromSeq == 0 {
		fromSeq = first
	}
	if fromSeq < first || fromSeq > e.nextSeq {
		e.mu.Unlock()
		return jupyter.ErrTruncated
	}
	*cursor = fromSeq
	e.followers[cursor] = struct{}{}
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.followers, cursor)
		e.broadcastLocked()
		e.mu.Unlock()
	}()
	for {
		e.mu.Lock()
		var batch []*raydv1.ExecuteEvent
		if len(e.events) > 0 {
			first = e.events[0].GetSeq()
			if *cursor < first {
				e.mu.Unlock()
				return jupyter.ErrTruncated
			}
			batch = append(batch, e.events[*cursor-first:]...)
		}
		ended, ch := e.ended, e.changed
		e.mu.Unlock()
		for _, ev := range batch {
			if err := send(ev); err != nil {
				return err
			}
			e.mu.Lock()
			*cursor = ev.GetSeq() + 1
			e.broadcastLocked()
			e.mu.Unlock()
		}
		if ended && len(batch) == 0 {
			return nil
		}
		if len(batch) > 0 {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
