package gateway

import (
	"math"
	"sync"
	"time"
)

// bucket is a token bucket: capacity = rate per minute, refilled at
// rate/60 tokens per second.
type bucket struct {
	mu     sync.Mutex
	now    func() time.Time
	rate   float64 // per minute
	tokens float64
	last   time.Time
}

func newBucket(now func() time.Time, ratePerMinute uint32) *bucket {
	return &bucket{now: now, rate: float64(ratePerMinute), tokens: float64(ratePerMinute), last: now()}
}

// setRate changes the rate, keeping the tokens (capped at the new capacity).
func (b *bucket) setRate(ratePerMinute uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	b.rate = float64(ratePerMinute)
	b.tokens = math.Min(b.tokens, b.rate)
}

func (b *bucket) refill() {
	t := b.now()
	if d := t.Sub(b.last); d > 0 {
		b.tokens = math.Min(b.rate, b.tokens+d.Seconds()*b.rate/60)
	}
	b.last = t
}

// take takes one token. If none is available it returns false and the
// number of whole seconds (>= 1) until one is.
func (b *bucket) take() (ok bool, retryAfter int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill()
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	if b.rate <= 0 {
		return false, 60
	}
	secs := int(math.Ceil((1 - b.tokens) * 60 / b.rate))
	if secs < 1 {
		secs = 1
	}
	return false, secs
}
