// Package backoff is the SDK's one poll-and-back-off helper: a delay that
// doubles up to a ceiling, and a sleep that a context ends. Every wait
// loop of the SDK (readiness, reconnection, state transitions, template
// builds, transfers, the metadata index, a pool's refills) uses it.
package backoff

import (
	"context"
	"time"
)

// Backoff is a delay that starts at First and doubles after each Next up
// to Max. The zero value waits nothing.
type Backoff struct {
	First, Max time.Duration
	next       time.Duration
}

// New returns a Backoff from first to max.
func New(first, max time.Duration) Backoff {
	return Backoff{First: first, Max: max, next: first}
}

// Next returns the delay to wait now; the one after it is twice as long
// (at most Max).
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next = min(2*b.next, b.Max)
	return d
}

// Reset starts again from First.
func (b *Backoff) Reset() { b.next = b.First }

// Wait sleeps Next() or until ctx ends (then ctx's error).
func (b *Backoff) Wait(ctx context.Context) error { return Sleep(ctx, b.Next()) }

// Nth is the n-th delay (n ≥ 1) of a Backoff from first to max, for a
// count kept elsewhere (a pool's failures in a row).
func Nth(first, max time.Duration, n int) time.Duration {
	d := first
	for i := 1; i < n && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// Sleep waits d or until ctx ends (then ctx's error); d ≤ 0 only checks
// ctx.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
