package rayito

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// leaseFakeClock runs AfterFunc callbacks when Advance passes their time.
type leaseFakeClock struct {
	mu     sync.Mutex
	now    time.Duration
	timers []*leaseFakeTimer
}

type leaseFakeTimer struct {
	at      time.Duration
	f       func()
	stopped bool
}

func (c *leaseFakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &leaseFakeTimer{at: c.now + d, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// Advance moves the clock by d, running what falls due in time order.
func (c *leaseFakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now + d
	c.mu.Unlock()
	for {
		c.mu.Lock()
		sort.SliceStable(c.timers, func(i, j int) bool { return c.timers[i].at < c.timers[j].at })
		var next *leaseFakeTimer
		for i, t := range c.timers {
			if !t.stopped && t.at <= end {
				next = t
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				break
			}
		}
		if next == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		c.now = next.at
		next.stopped = true
		c.mu.Unlock()
		next.f()
	}
}

// leaseFake records what leases did.
type leaseFake struct {
	mu                            sync.Mutex
	beats, pauses, resumes, state int // state: 0 running, 1 paused
	log                           []string
	ended                         bool
}

func (f *leaseFake) add(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s)
}

func (f *leaseFake) running(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return ErrSandboxEnded
	}
	if f.state == 1 {
		f.resumes++
		f.state = 0
		f.log = append(f.log, "resume")
	}
	return nil
}

func (f *leaseFake) heartbeat(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == 1 {
		return errors.New("heartbeat to a paused sandbox")
	}
	f.beats++
	return nil
}

func (f *leaseFake) pause(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pauses++
	f.state = 1
	f.log = append(f.log, "pause")
	return nil
}

func (f *leaseFake) resume(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumes++
	f.state = 0
	f.log = append(f.log, "resume")
	return nil
}

func (f *leaseFake) counts() (beats, pauses, resumes, state int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.beats, f.pauses, f.resumes, f.state
}

// TestLeaseKeepsRunningThenPauses: a lease heartbeats through a long
// silent stretch, and its end pauses the sandbox PauseAfter later, after
// the pre-pause hooks; a lease taken meanwhile cancels the pause, one
// taken after it resumes the sandbox.
func TestLeaseKeepsRunningThenPauses(t *testing.T) {
	t.Parallel()
	clk, fs, sbx := &leaseFakeClock{}, &leaseFake{}, &Sandbox{}
	opts := []LeaseOption{withLeaseClock(clk), WithHeartbeat(20 * time.Second), WithPauseAfter(30 * time.Second),
		WithPrePause(func(context.Context, *Sandbox) error { fs.add("hook1"); return nil }),
		WithPrePause(func(context.Context, *Sandbox) error { fs.add("hook2"); return errors.New("hook2 failed") })}
	var errs []error
	var emu sync.Mutex
	opts = append(opts, WithLeaseErrors(func(err error) { emu.Lock(); errs = append(errs, err); emu.Unlock() }))

	l, err := sbx.lease(t.Context(), fs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	// A 15-minute silent model call: a heartbeat every 20 s, no pause.
	clk.Advance(15 * time.Minute)
	if b, p, _, st := fs.counts(); b != 1+45 || p != 0 || st != 0 {
		t.Fatalf("during the lease: %d beats, %d pauses, state %d", b, p, st)
	}
	l.End()
	l.End() // once
	<-l.Done()
	clk.Advance(29 * time.Second)
	if _, p, _, _ := fs.counts(); p != 0 {
		t.Fatal("paused before PauseAfter")
	}
	// A lease taken before the pause keeps it running.
	l2, err := sbx.lease(t.Context(), fs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if _, p, _, _ := fs.counts(); p != 0 {
		t.Fatal("paused under a new lease")
	}
	// Two leases: the pause waits for both.
	l3, err := sbx.lease(t.Context(), fs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	l2.End()
	clk.Advance(time.Minute)
	if _, p, _, _ := fs.counts(); p != 0 {
		t.Fatal("paused while a lease is alive")
	}
	beats, _, _, _ := fs.counts()
	l3.End()
	clk.Advance(30 * time.Second)
	if b, p, _, st := fs.counts(); p != 1 || st != 1 || b != beats {
		t.Fatalf("after the last lease: %d pauses, state %d, %d beats (want %d: none after the end)", p, st, b, beats)
	}
	fs.mu.Lock()
	if got := fs.log; len(got) != 3 || got[0] != "hook1" || got[1] != "hook2" || got[2] != "pause" {
		t.Errorf("order: %v", got)
	}
	fs.mu.Unlock()
	emu.Lock()
	if len(errs) != 1 || errs[0].Error() != "hook2 failed" {
		t.Errorf("errors: %v", errs)
	}
	emu.Unlock()
	// A new lease resumes the sandbox its end paused.
	l4, err := sbx.lease(t.Context(), fs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, r, st := fs.counts(); r != 1 || st != 0 {
		t.Errorf("a lease on the paused sandbox: %d resumes, state %d", r, st)
	}
	l4.End()
}

// TestLeaseContext: the lease ends with its context.
func TestLeaseContext(t *testing.T) {
	t.Parallel()
	clk, fs, sbx := &leaseFakeClock{}, &leaseFake{}, &Sandbox{}
	ctx, cancel := context.WithCancel(t.Context())
	l, err := sbx.lease(ctx, fs, withLeaseClock(clk), WithPauseAfter(0))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the lease outlived its context")
	}
	clk.Advance(0)
	if _, p, _, _ := fs.counts(); p != 1 {
		t.Errorf("%d pauses, want 1 at once (PauseAfter 0)", p)
	}
}

// TestLeaseRefused: bad options and an ended sandbox take no lease.
func TestLeaseRefused(t *testing.T) {
	t.Parallel()
	fs, sbx := &leaseFake{}, &Sandbox{}
	for _, o := range []LeaseOption{WithHeartbeat(0), WithHeartbeat(time.Minute), WithPauseAfter(-1), WithPauseAfter(2 * time.Hour)} {
		if _, err := sbx.lease(t.Context(), fs, o); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%v", err)
		}
	}
	fs.ended = true
	if _, err := sbx.lease(t.Context(), fs, withLeaseClock(&leaseFakeClock{})); !errors.Is(err, ErrSandboxEnded) {
		t.Errorf("a lease on an ended sandbox: %v", err)
	}
	if sbx.leases.active != 0 {
		t.Errorf("%d leases counted after refusals", sbx.leases.active)
	}
}

// TestLeaseSandboxEnded: a heartbeat that finds the sandbox ended ends
// the lease, with no pause.
func TestLeaseSandboxEnded(t *testing.T) {
	t.Parallel()
	clk, fs, sbx := &leaseFakeClock{}, &endingFake{}, &Sandbox{}
	var got []error
	l, err := sbx.lease(t.Context(), fs, withLeaseClock(clk), WithPauseAfter(0), WithLeaseErrors(func(err error) { got = append(got, err) }))
	if err != nil {
		t.Fatal(err)
	}
	fs.ended.Store(true)
	clk.Advance(DefaultLeaseHeartbeat)
	select {
	case <-l.Done():
	default:
		t.Fatal("the lease outlived its sandbox")
	}
	clk.Advance(time.Hour)
	if fs.pauses.Load() != 0 || len(got) != 1 || !errors.Is(got[0], ErrSandboxEnded) {
		t.Errorf("%d pauses, errors %v", fs.pauses.Load(), got)
	}
}

// endingFake is a sandbox that ends when told.
type endingFake struct {
	ended  atomic.Bool
	pauses atomic.Int32
}

func (f *endingFake) running(context.Context) error { return nil }
func (f *endingFake) heartbeat(context.Context) error {
	if f.ended.Load() {
		return &SandboxEndedError{ID: "x"}
	}
	return nil
}
func (f *endingFake) pause(context.Context) error  { f.pauses.Add(1); return nil }
func (f *endingFake) resume(context.Context) error { return nil }
