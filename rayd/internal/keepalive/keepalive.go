// Package keepalive serializes the sends of one server stream and sends a
// keepalive message after a period of silence, so proxies and clients can
// tell a quiet stream from a dead one.
package keepalive

import (
	"sync"
	"time"
)

// Sender wraps a stream's send function. It is safe for concurrent use.
type Sender[T any] struct {
	mu       sync.Mutex
	send     func(*T) error
	make     func() *T
	interval time.Duration
	last     time.Time
	timer    *time.Timer
	err      error
	stopped  bool
}

// Start returns a Sender that calls send for every message and sends
// makeKeepalive() whenever interval passes without a message. Call Stop
// when the stream ends.
func Start[T any](interval time.Duration, send func(*T) error, makeKeepalive func() *T) *Sender[T] {
	s := &Sender[T]{send: send, make: makeKeepalive, interval: interval, last: time.Now()}
	s.timer = time.AfterFunc(interval, s.tick)
	return s
}

// Send sends m. After a failed send every later Send returns the same error.
func (s *Sender[T]) Send(m *T) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.err = s.send(m)
	s.last = time.Now()
	return s.err
}

func (s *Sender[T]) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped || s.err != nil {
		return
	}
	if idle := time.Since(s.last); idle < s.interval {
		s.timer.Reset(s.interval - idle)
		return
	}
	s.err = s.send(s.make())
	s.last = time.Now()
	if s.err == nil {
		s.timer.Reset(s.interval)
	}
}

// Stop stops the keepalives; it waits for a keepalive being sent.
func (s *Sender[T]) Stop() {
	s.timer.Stop()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
}
