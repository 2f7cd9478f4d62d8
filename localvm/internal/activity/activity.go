// Package activity counts a microVM's data-plane traffic for its idle
// policy: bytes through the endpoint proxy in each direction and the
// requests in flight. The proxy updates a Meter on every read and write
// (atomics only, nothing of the traffic itself is kept); the registry
// reads it a few times a second.
package activity

import (
	"sync/atomic"
	"time"
)

// epoch is the zero of the Meter's monotonic timestamps.
var epoch = time.Now()

// Meter is one microVM's traffic counters. The zero value is ready; a nil
// *Meter counts nothing. Safe for concurrent use.
type Meter struct {
	in, out  atomic.Uint64 // bytes client → guest, guest → client
	inFlight atomic.Int64
	lastEnd  atomic.Int64 // when the last request ended, in ns since epoch (0: none)
}

// Begin marks a request in flight until its End.
func (m *Meter) Begin() {
	if m != nil {
		m.inFlight.Add(1)
	}
}

// End ends a request Begin counted.
func (m *Meter) End() {
	if m != nil {
		m.lastEnd.Store(int64(time.Since(epoch)))
		m.inFlight.Add(-1)
	}
}

// In counts n bytes from the client to the guest.
func (m *Meter) In(n int) {
	if m != nil && n > 0 {
		m.in.Add(uint64(n))
	}
}

// Out counts n bytes from the guest to the client.
func (m *Meter) Out(n int) {
	if m != nil && n > 0 {
		m.out.Add(uint64(n))
	}
}

// Snapshot is a Meter's counters at one moment.
type Snapshot struct {
	In, Out  uint64
	InFlight int64
	// LastEnd is when the last request ended (zero if none has).
	LastEnd time.Time
}

// Read returns the counters now.
func (m *Meter) Read() Snapshot {
	if m == nil {
		return Snapshot{}
	}
	s := Snapshot{In: m.in.Load(), Out: m.out.Load(), InFlight: m.inFlight.Load()}
	if ns := m.lastEnd.Load(); ns != 0 {
		s.LastEnd = epoch.Add(time.Duration(ns))
	}
	return s
}
