package rayito

import (
	"context"
	"errors"
	"sync"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// Lease defaults and bounds.
const (
	// DefaultLeaseHeartbeat is how often a lease shows the sandbox is in
	// use: well under the platform's shortest idle time (a minute).
	DefaultLeaseHeartbeat = 20 * time.Second
	// DefaultPauseAfter is how long after its last lease ended a sandbox
	// is paused.
	DefaultPauseAfter = 30 * time.Second
	minLeaseHeartbeat = time.Second
	maxLeaseHeartbeat = 50 * time.Second
	maxPauseAfter     = time.Hour
)

// LeaseOption configures Sandbox.Lease.
type LeaseOption interface{ applyLease(*leaseConfig) }

type leaseConfig struct {
	heartbeat  time.Duration
	pauseAfter time.Duration
	prePause   []func(context.Context, *Sandbox) error
	onError    func(error)
	clock      leaseClock
}

type leaseOption func(*leaseConfig)

func (f leaseOption) applyLease(c *leaseConfig) { f(c) }

// WithHeartbeat sets how often the lease shows the platform the sandbox
// is in use (default DefaultLeaseHeartbeat, 1s to 50s): a small request
// to its daemon, which counts as traffic for the idle policy
// (WithIdlePolicy) on AWS, where an open but silent stream does not, and
// locally.
func WithHeartbeat(d time.Duration) LeaseOption {
	return leaseOption(func(c *leaseConfig) { c.heartbeat = d })
}

// WithPauseAfter sets how long after the sandbox's last lease ended it is
// paused (default DefaultPauseAfter, 0 to 1h; 0 pauses it at once). A
// lease taken meanwhile keeps it running.
func WithPauseAfter(d time.Duration) LeaseOption {
	return leaseOption(func(c *leaseConfig) { c.pauseAfter = d })
}

// WithPrePause adds a hook run before the pause this lease's end leads
// to, in the order given (flush a log, save state). A hook's error goes
// to WithLeaseErrors and does not stop the pause.
func WithPrePause(hook func(ctx context.Context, sbx *Sandbox) error) LeaseOption {
	return leaseOption(func(c *leaseConfig) { c.prePause = append(c.prePause, hook) })
}

// WithLeaseErrors receives what failed in the background: heartbeats,
// pre-pause hooks, the pause. Without it they are dropped (the platform's
// idle policy and the sandbox's timeout still apply).
func WithLeaseErrors(f func(error)) LeaseOption {
	return leaseOption(func(c *leaseConfig) { c.onError = f })
}

// leaseClock is the lease's time (a fake one in tests).
type leaseClock interface {
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// withLeaseClock sets the clock (tests).
func withLeaseClock(c leaseClock) LeaseOption {
	return leaseOption(func(cf *leaseConfig) { cf.clock = c })
}

// leaseActions are what leases do to a sandbox (fakes in tests).
type leaseActions interface {
	// running resumes the sandbox when it is paused (a *SandboxEndedError
	// when it ended).
	running(ctx context.Context) error
	heartbeat(ctx context.Context) error
	pause(ctx context.Context) error
	resume(ctx context.Context) error
}

// leaseSet is one sandbox's leases: how many are alive, and the pause
// scheduled once none is.
type leaseSet struct {
	mu sync.Mutex
	// active counts the leases alive; gen changes whenever one starts,
	// so that a pause scheduled before it does nothing.
	active int
	gen    uint64
	cancel func() bool // stops the scheduled pause
	// paused: this set paused the sandbox and no lease resumed it.
	paused bool
}

// Lease is a sandbox kept running for an agent's run: while it is alive
// the sandbox is not idle, however long the run is silent (a model call
// of many minutes), and once the sandbox's last lease ends it is paused
// (after WithPauseAfter). Safe for concurrent use.
type Lease struct {
	sbx     *Sandbox
	set     *leaseSet
	act     leaseActions
	cfg     leaseConfig
	once    sync.Once
	done    chan struct{}
	stopCtx func() bool
	mu      sync.Mutex
	stopHB  func() bool
}

// Lease takes a lease on the sandbox until End or until ctx is done:
// the sandbox is resumed first if a lease paused it (or it is paused),
// heartbeats keep it from being idle meanwhile, and when its last lease
// has ended it is paused WithPauseAfter later, after the WithPrePause
// hooks. A sandbox that ended is a *SandboxEndedError.
func (s *Sandbox) Lease(ctx context.Context, opts ...LeaseOption) (*Lease, error) {
	return s.lease(ctx, sandboxLeaseActions{s}, opts...)
}

func (s *Sandbox) lease(ctx context.Context, act leaseActions, opts ...LeaseOption) (*Lease, error) {
	cfg := leaseConfig{heartbeat: DefaultLeaseHeartbeat, pauseAfter: DefaultPauseAfter, clock: realClock{}}
	for _, o := range opts {
		o.applyLease(&cfg)
	}
	if cfg.heartbeat < minLeaseHeartbeat || cfg.heartbeat > maxLeaseHeartbeat {
		return nil, newError(ReasonInvalidArgument, "a lease's heartbeat must be between 1s and 50s")
	}
	if cfg.pauseAfter < 0 || cfg.pauseAfter > maxPauseAfter {
		return nil, newError(ReasonInvalidArgument, "a lease's pause delay must be between 0s and 1h")
	}
	set := &s.leases
	set.mu.Lock()
	set.active++
	set.gen++
	if set.cancel != nil {
		set.cancel()
		set.cancel = nil
	}
	wasPaused := set.paused
	set.paused = false
	set.mu.Unlock()
	l := &Lease{sbx: s, set: set, act: act, cfg: cfg, done: make(chan struct{})}
	// Running first: a lease resumes the sandbox its end paused, and one
	// something else paused (the platform's idle policy).
	var err error
	if wasPaused {
		err = act.resume(ctx)
	} else {
		err = act.running(ctx)
	}
	if err == nil {
		hctx, cancel := context.WithTimeout(ctx, cfg.heartbeat)
		err = act.heartbeat(hctx)
		cancel()
	}
	if err != nil {
		l.release(false)
		return nil, err
	}
	l.mu.Lock()
	l.stopHB = cfg.clock.AfterFunc(cfg.heartbeat, l.beat)
	l.mu.Unlock()
	stop := context.AfterFunc(ctx, l.End)
	l.mu.Lock()
	l.stopCtx = stop
	l.mu.Unlock()
	return l, nil
}

// beat sends one heartbeat and schedules the next while the lease lives.
func (l *Lease) beat() {
	select {
	case <-l.done:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.heartbeat)
	err := l.act.heartbeat(ctx)
	cancel()
	if errors.Is(err, ErrSandboxEnded) {
		// Nothing left to hold or to pause.
		l.report(err)
		l.release(false)
		return
	}
	if err != nil {
		l.report(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
	default:
		l.stopHB = l.cfg.clock.AfterFunc(l.cfg.heartbeat, l.beat)
	}
}

func (l *Lease) report(err error) {
	if l.cfg.onError != nil && err != nil {
		l.cfg.onError(err)
	}
}

// End ends the lease (once; later calls do nothing). When it was the
// sandbox's last, the pause is scheduled. A lease also ends, without a
// pause, when a heartbeat finds the sandbox ended.
func (l *Lease) End() { l.release(true) }

// Done is closed when the lease has ended.
func (l *Lease) Done() <-chan struct{} { return l.done }

func (l *Lease) release(schedule bool) {
	l.once.Do(func() {
		close(l.done)
		l.mu.Lock()
		if l.stopCtx != nil {
			l.stopCtx()
		}
		if l.stopHB != nil {
			l.stopHB()
		}
		l.mu.Unlock()
		set := l.set
		set.mu.Lock()
		defer set.mu.Unlock()
		set.active--
		if set.active > 0 || !schedule {
			return
		}
		gen := set.gen
		set.cancel = l.cfg.clock.AfterFunc(l.cfg.pauseAfter, func() { l.pauseIfIdle(gen) })
	})
}

// pauseIfIdle pauses the sandbox unless a lease was taken since gen.
func (l *Lease) pauseIfIdle(gen uint64) {
	set := l.set
	set.mu.Lock()
	if set.gen != gen || set.active > 0 {
		set.mu.Unlock()
		return
	}
	set.cancel = nil
	set.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, hook := range l.cfg.prePause {
		l.report(hook(ctx, l.sbx))
	}
	set.mu.Lock()
	if set.gen != gen || set.active > 0 {
		// A lease was taken while the hooks ran.
		set.mu.Unlock()
		return
	}
	// Held across the pause: a lease taken meanwhile waits for it, then
	// resumes the sandbox.
	defer set.mu.Unlock()
	if err := l.act.pause(ctx); err != nil {
		l.report(err)
		return
	}
	set.paused = true
}

// sandboxLeaseActions are a Sandbox's own.
type sandboxLeaseActions struct{ s *Sandbox }

func (a sandboxLeaseActions) heartbeat(ctx context.Context) error {
	// Health through the sandbox's endpoint: traffic the platform counts.
	_, err := a.s.dp.health.Health(ctx, connect.NewRequest(&raydv1.HealthRequest{}))
	if err != nil {
		if gone := a.s.endOf(ctx); gone != nil {
			return gone
		}
		return rpcErr("lease heartbeat", err)
	}
	return nil
}

func (a sandboxLeaseActions) running(ctx context.Context) error {
	vm, err := a.s.mv.GetMicrovm(ctx, a.s.id)
	switch {
	case err != nil:
		return controlPlaneErr(a.s.cfg, a.s.id, err)
	case ended(vm.State):
		return endedErr(a.s.cfg, vm)
	case paused(vm.State):
		return a.s.Resume(ctx)
	}
	return nil
}

func (a sandboxLeaseActions) pause(ctx context.Context) error  { return a.s.Pause(ctx) }
func (a sandboxLeaseActions) resume(ctx context.Context) error { return a.s.Resume(ctx) }
