package microvms

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestDefaultRateLimits(t *testing.T) {
	t.Parallel()
	c, err := New("http://127.0.0.1:7450", Unsigned())
	if err != nil {
		t.Fatal(err)
	}
	want := map[Operation]float64{
		OpRunMicrovm: 5, OpResumeMicrovm: 5, OpSuspendMicrovm: 2, OpTerminateMicrovm: 10,
		OpGetMicrovm: 100, OpListMicrovms: 100, OpCreateMicrovmAuthToken: 50,
		OpCreateMicrovmShellAuthToken: 5,
	}
	got := map[Operation]float64{}
	for op, b := range c.buckets {
		got[op] = b.rate
		if b.burst != b.rate || b.tokens != b.burst {
			t.Errorf("%s: burst %v tokens %v, want %v", op, b.burst, b.tokens, b.rate)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rates %v, want %v", got, want)
	}

	c, err = New("http://127.0.0.1:7450", Unsigned(), WithRateLimits(map[Operation]float64{OpGetMicrovm: 0, OpRunMicrovm: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if c.buckets[OpGetMicrovm] != nil || c.buckets[OpRunMicrovm].rate != 1 || c.buckets[OpSuspendMicrovm].rate != 2 {
		t.Errorf("overrides not applied: %v", c.buckets)
	}
	c, err = New("http://127.0.0.1:7450", Unsigned(), WithoutRateLimits())
	if err != nil || len(c.buckets) != 0 {
		t.Errorf("WithoutRateLimits: %v %v", c.buckets, err)
	}
}

// TestRateLimitFakeClock drives the bucket with a fake clock: the burst
// passes at once, then calls are spaced by 1/rate.
func TestRateLimitFakeClock(t *testing.T) {
	t.Parallel()
	f := newFake(t, always(reply{body: vmJSON}))
	clock := &fakeClock{t: time.Unix(1_000_000, 0)}
	s := &sleeper{clock: clock}
	c, err := New(f.URL, Unsigned(), withSleep(s.sleep), withMonoNow(clock.now),
		WithRateLimits(map[Operation]float64{OpGetMicrovm: 2}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for range 5 {
		if _, err := c.GetMicrovm(ctx, "microvm-1"); err != nil {
			t.Fatal(err)
		}
	}
	half := 500 * time.Millisecond
	if w := s.recorded(); !reflect.DeepEqual(w, []time.Duration{half, half, half}) {
		t.Errorf("waits %v, want 3 x 500ms", w)
	}

	// Other operations have their own buckets.
	if _, err := c.ListMicrovms(ctx, ListInput{}); err != nil {
		t.Fatal(err)
	}
	if n := len(s.recorded()); n != 3 {
		t.Errorf("List waited: %v", s.recorded())
	}

	// After a long pause the bucket is full again, but no fuller.
	clock.advance(time.Hour)
	for range 3 {
		if _, err := c.GetMicrovm(ctx, "microvm-1"); err != nil {
			t.Fatal(err)
		}
	}
	if w := s.recorded(); len(w) != 4 || w[3] != half {
		t.Errorf("waits after refill %v, want one more 500ms", w)
	}
}

// TestRateLimitRealClock checks spacing with the real clock, loosely.
func TestRateLimitRealClock(t *testing.T) {
	t.Parallel()
	f := newFake(t, always(reply{body: vmJSON}))
	for _, tt := range []struct {
		rate     float64
		calls    int
		min, max time.Duration
	}{
		{rate: 20, calls: 30, min: 400 * time.Millisecond, max: 10 * time.Second}, // 10 beyond the burst at 20/s: ≥ 0.5 s
		{rate: 1000, calls: 30, min: 0, max: 5 * time.Second},                     // within the burst
	} {
		c, err := New(f.URL, Unsigned(), WithRateLimits(map[Operation]float64{OpGetMicrovm: tt.rate}))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for range tt.calls {
			if _, err := c.GetMicrovm(t.Context(), "microvm-1"); err != nil {
				t.Fatal(err)
			}
		}
		if el := time.Since(start); el < tt.min || el > tt.max {
			t.Errorf("rate %v: %d calls took %v, want in [%v, %v]", tt.rate, tt.calls, el, tt.min, tt.max)
		}
	}
}

func TestRateLimitCancel(t *testing.T) {
	t.Parallel()
	f := newFake(t, always(reply{body: vmJSON}))
	c, err := New(f.URL, Unsigned(), WithRateLimits(map[Operation]float64{OpSuspendMicrovm: 0.1}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SuspendMicrovm(t.Context(), "microvm-1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	err = c.SuspendMicrovm(ctx, "microvm-1")
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Errorf("error %v after %v", err, time.Since(start))
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	// An already cancelled context fails before taking a token.
	if err := c.SuspendMicrovm(ctx, "microvm-1"); !errors.Is(err, context.Canceled) {
		t.Errorf("error %v", err)
	}
}

func TestBucket(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	b := newBucket(0.5, t0) // burst 1
	if d := b.reserve(t0); d != 0 {
		t.Errorf("first: %v", d)
	}
	if d := b.reserve(t0); d != 2*time.Second {
		t.Errorf("second: %v, want 2s", d)
	}
	b.unreserve()
	if d := b.reserve(t0); d != 2*time.Second {
		t.Errorf("after unreserve: %v, want 2s", d)
	}
	if d := b.reserve(t0.Add(2 * time.Second)); d != 2*time.Second {
		t.Errorf("queued: %v, want 2s", d)
	}
}
