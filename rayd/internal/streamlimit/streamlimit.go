// Package streamlimit bounds the streams rayd serves at once, across all
// its ports: server and client streams (process and PTY output, file
// reads and writes, directory watches, code cells) and the plain HTTP file
// transfers. Unary calls are never counted, so control calls (List,
// SendSignal, Kill, Health, ...) still answer while every stream slot is
// taken; a stream over the limit is refused at once with ErrTooMany
// (ResourceExhausted on the wire) instead of waiting or costing a
// connection.
package streamlimit

import "errors"

// Default is the streams a sandbox serves at once, as many as it may have
// live processes and PTYs.
const Default = 256

// ErrTooMany is the error of a stream over the limit.
var ErrTooMany = errors.New("streamlimit: too many open streams")

// Limit counts open streams. The zero value and a nil *Limit admit every
// stream.
type Limit struct{ slots chan struct{} }

// New returns a Limit of n streams at once (n <= 0: no limit).
func New(n int) *Limit {
	if n <= 0 {
		return &Limit{}
	}
	return &Limit{slots: make(chan struct{}, n)}
}

// Acquire takes a slot without waiting: release gives it back (call it
// exactly once); ErrTooMany when every slot is taken.
func (l *Limit) Acquire() (release func(), err error) {
	if l == nil || l.slots == nil {
		return func() {}, nil
	}
	select {
	case l.slots <- struct{}{}:
		return func() { <-l.slots }, nil
	default:
		return nil, ErrTooMany
	}
}

// Open reports how many streams hold a slot.
func (l *Limit) Open() int {
	if l == nil || l.slots == nil {
		return 0
	}
	return len(l.slots)
}
