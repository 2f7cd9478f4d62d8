package microvms

import (
	"context"
	"sync"
	"time"
)

// bucket is a token bucket. Callers reserve a token, going into debt when
// the bucket is empty, and wait until the debt is paid off; a cancelled
// waiter hands its token back.
type bucket struct {
	mu     sync.Mutex
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time
}

func newBucket(rate float64, now time.Time) *bucket {
	burst := max(rate, 1)
	return &bucket{rate: rate, burst: burst, tokens: burst, last: now}
}

// reserve takes one token and returns how long to wait before using it.
func (b *bucket) reserve(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.burst, b.tokens+el.Seconds()*b.rate)
		b.last = now
	}
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.rate * float64(time.Second))
}

// unreserve gives back a token whose wait was abandoned.
func (b *bucket) unreserve() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens = min(b.burst, b.tokens+1)
}

// wait blocks until op may send a request, or ctx ends.
func (c *Client) wait(ctx context.Context, op Operation) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b := c.buckets[op]
	if b == nil {
		return nil
	}
	d := b.reserve(c.monoNow())
	if d <= 0 {
		return nil
	}
	if err := c.sleep(ctx, d); err != nil {
		b.unreserve()
		return err
	}
	return nil
}

// The image, build, managed-image, shell-token and tag operations.
const (
	OpCreateMicrovmImage              Operation = "CreateMicrovmImage"
	OpListMicrovmImages               Operation = "ListMicrovmImages"
	OpGetMicrovmImage                 Operation = "GetMicrovmImage"
	OpUpdateMicrovmImage              Operation = "UpdateMicrovmImage"
	OpDeleteMicrovmImage              Operation = "DeleteMicrovmImage"
	OpListMicrovmImageVersions        Operation = "ListMicrovmImageVersions"
	OpGetMicrovmImageVersion          Operation = "GetMicrovmImageVersion"
	OpUpdateMicrovmImageVersion       Operation = "UpdateMicrovmImageVersion"
	OpDeleteMicrovmImageVersion       Operation = "DeleteMicrovmImageVersion"
	OpListMicrovmImageBuilds          Operation = "ListMicrovmImageBuilds"
	OpGetMicrovmImageBuild            Operation = "GetMicrovmImageBuild"
	OpListManagedMicrovmImages        Operation = "ListManagedMicrovmImages"
	OpListManagedMicrovmImageVersions Operation = "ListManagedMicrovmImageVersions"
	OpCreateMicrovmShellAuthToken     Operation = "CreateMicrovmShellAuthToken"
	OpTagResource                     Operation = "TagResource"
	OpUntagResource                   Operation = "UntagResource"
	OpListTags                        Operation = "ListTags"
)

// publishedRates are the service's TPS quotas (contracts.md §2.7) for
// operations beyond the microVM ones. Only the shell token has one; the
// image, build, managed-image and tag operations have no published quota,
// so they get no client-side bucket by default (set one with
// [WithRateLimits]); the service's throttling is still retried.
var publishedRates = map[Operation]float64{
	OpCreateMicrovmShellAuthToken: 5,
}
