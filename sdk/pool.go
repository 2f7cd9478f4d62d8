package rayito

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/internal/backoff"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// Pool limits and defaults (PoolConfig).
const (
	// MaxPoolSize is the largest PoolConfig.Size.
	MaxPoolSize = 64
	// DefaultPoolMinRemaining: a slot whose sandbox would end sooner than
	// this is dropped, not handed out.
	DefaultPoolMinRemaining = time.Hour
	// DefaultPoolFillConcurrency is how many sandboxes a pool creates at
	// once.
	DefaultPoolFillConcurrency = 4
	// DefaultPoolSweepInterval is how often a pool checks its slots.
	DefaultPoolSweepInterval = 30 * time.Second
	// DefaultPoolLifetime is the lifetime of a pool's sandboxes when its
	// Create options set none (no WithTimeout, WithMaxLifetime,
	// WithOnTimeout or WithAutoResume): the platform's maximum, 8 hours.
	DefaultPoolLifetime = 8 * time.Hour
)

// ErrPoolClosed: the SandboxPool was closed (Take after Close, or a Take
// waiting for a slot when Close came).
var ErrPoolClosed = errors.New("rayito: sandbox pool closed")

// PoolConfig configures NewPool.
type PoolConfig struct {
	// Size is how many ready sandboxes the pool keeps, 1 to MaxPoolSize.
	Size int
	// Create are the options every sandbox of the pool is created with
	// (backend, endpoint, template, timeout, envs, metadata, user,
	// network, role, connectors, secrets...). Without a lifetime option
	// the pool's sandboxes live DefaultPoolLifetime.
	Create []Option
	// MinRemaining: a slot whose sandbox the platform would end within
	// this is swept, never handed out; default DefaultPoolMinRemaining. It
	// must be shorter than the sandboxes' lifetime.
	MinRemaining time.Duration
	// FillConcurrency is how many sandboxes the pool creates at once;
	// default DefaultPoolFillConcurrency.
	FillConcurrency int
	// SweepInterval is how often the pool asks the platform about its
	// slots; default DefaultPoolSweepInterval.
	SweepInterval time.Duration
	// Warmup, when set, runs on every new sandbox of the pool before it
	// is paused (install a dependency, start a server, write a file):
	// what it leaves in memory and on disk is there when Take hands the
	// sandbox out. An error kills the sandbox (a fill failure). It must
	// not keep sbx: the pool pauses it.
	Warmup func(ctx context.Context, sbx *Sandbox) error
	// Store keeps the slots' records; default NewPoolMemoryStore. With
	// NewPoolFileStore a pool made again over the same file adopts the
	// previous one's sandboxes. A store belongs to one pool (and one set
	// of Create options) at a time.
	Store PoolStore
}

// PoolStats are a SandboxPool's counters (SandboxPool.Stats).
type PoolStats struct {
	// Ready is how many slots wait to be taken; Filling how many fills
	// are under way (created, warmed up or paused now, or waiting out the
	// backoff after a failure).
	Ready, Filling int
	// Taken counts the sandboxes Take handed out: Hits (a ready slot,
	// resumed) plus Fallbacks (created on the spot: no slot was ready).
	Taken, Hits, Fallbacks int
	// FillFailures counts sandboxes the pool could not create or pause;
	// ResumeFailures slots Take could not resume (killed, and the next
	// one tried); Swept slots dropped because their sandbox ended or would
	// end within MinRemaining.
	FillFailures, ResumeFailures, Swept int
	// KeepsRunning is true when the platform refused to pause a sandbox
	// (a local platform without root has no cgroup freezer): the pool then
	// keeps its slots running, and they cost compute while they wait.
	KeepsRunning bool
}

// SandboxPool keeps sandboxes created and paused ahead of time, so that
// Take hands one out in the time of a resume instead of a create. Every
// slot is a sandbox made with the pool's Create options, then paused
// (Sandbox.Pause); its record holds its id and access token, never its
// envs or secrets. In the background the pool refills itself up to its
// size and, every SweepInterval, drops the slots whose sandbox ended or
// would end within MinRemaining. It is safe for concurrent use. Close it
// to kill its paused sandboxes; the ones Take handed out are the caller's.
type SandboxPool struct {
	cfg      PoolConfig
	create   []Option // the Create options, the pool's default lifetime first
	base     *config  // newConfig(create): the control plane, the token store
	mv       *microvms.Client
	store    PoolStore
	lifetime time.Duration

	ctx    context.Context // the background work's; Close cancels it
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	ready   []PoolSlot          // oldest first
	filling map[string]PoolSlot // created, not ready yet
	// live are the Sandbox values of the ready slots this process filled:
	// a Take without options hands out that value, whose endpoint token
	// is already minted (one control-plane call less per Take).
	live       map[string]*Sandbox
	fillers    int           // fill goroutines running
	changed    chan struct{} // closed (and replaced) when a slot is ready or the pool closes
	closed     bool
	keepAwake  bool // the platform cannot pause
	failStreak int
	stats      PoolStats
}

// NewPool makes a pool and starts filling it in the background; it does
// not wait for the first slot (Take falls back to Create until one is
// ready, or waits with WithWait). Bad configuration (Size out of 1 to
// MaxPoolSize, negative durations, a MinRemaining not shorter than the
// sandboxes' lifetime, bad lifetime or secret options) is
// ErrInvalidArgument, before any call. The records the Store holds are
// adopted: ready slots join the pool (the first sweep, at once, checks
// them), slots a previous pool was still filling are killed.
func NewPool(ctx context.Context, pc PoolConfig) (*SandboxPool, error) {
	if pc.Size < 1 || pc.Size > MaxPoolSize {
		return nil, newError(ReasonInvalidArgument, fmt.Sprintf("pool: size %d is out of range (1 to %d)", pc.Size, MaxPoolSize))
	}
	if pc.MinRemaining < 0 || pc.FillConcurrency < 0 || pc.SweepInterval < 0 {
		return nil, newError(ReasonInvalidArgument, "pool: MinRemaining, FillConcurrency and SweepInterval may not be negative")
	}
	if pc.MinRemaining == 0 {
		pc.MinRemaining = DefaultPoolMinRemaining
	}
	if pc.FillConcurrency == 0 {
		pc.FillConcurrency = DefaultPoolFillConcurrency
	}
	if pc.SweepInterval == 0 {
		pc.SweepInterval = DefaultPoolSweepInterval
	}
	if pc.Store == nil {
		pc.Store = NewPoolMemoryStore()
	}
	create := slices.Clone(pc.Create)
	if c := newConfig(create); !c.timeoutSet && c.onTimeout == "" && !c.autoResume && c.maxLifetime == 0 {
		create = append([]Option{WithTimeout(DefaultPoolLifetime)}, create...)
	}
	cfg := newConfig(create)
	plan, err := planRun(cfg)
	if err != nil {
		return nil, err
	}
	if err := cfg.checkExtensions(); err != nil {
		return nil, err
	}
	lifetime := time.Duration(plan.maxDuration) * time.Second
	if pc.MinRemaining >= lifetime {
		return nil, newError(ReasonInvalidArgument, fmt.Sprintf("pool: MinRemaining (%s) must be shorter than the sandboxes' lifetime (%s)", pc.MinRemaining, lifetime))
	}
	mv, err := controlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	records, err := pc.Store.Load(ctx)
	if err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &SandboxPool{cfg: pc, create: create, base: cfg, mv: mv, store: pc.Store, lifetime: lifetime,
		ctx: bg, cancel: cancel, filling: map[string]PoolSlot{}, live: map[string]*Sandbox{}, changed: make(chan struct{})}
	var stale []string
	for _, r := range records {
		if r.Filling {
			stale = append(stale, r.ID)
			continue
		}
		p.ready = append(p.ready, r)
	}
	for _, id := range stale {
		_ = p.kill(ctx, id)
	}
	p.mu.Lock()
	p.saveLocked()
	p.mu.Unlock()
	p.wg.Add(1)
	go p.sweeper()
	return p, nil
}

// TakeOption configures SandboxPool.Take: WithWait, and the secret
// options of Create (sdk/secrets: WithSecrets, WithStore, WithCache,
// WithGateways, WithPlaceholders, WithHeaderRules), which the taken
// sandbox gets (a resumed slot is configured after its resume; a
// fallback is created with them). Take refuses every other option with
// ErrInvalidArgument: the sandbox's other settings are the pool's.
type TakeOption = Option

// waitOption is WithWait; Create and the other calls ignore it.
type waitOption struct{}

func (waitOption) applySandbox(*config) {}

// WithWait makes SandboxPool.Take wait for a ready slot, as long as its
// ctx allows, instead of creating a sandbox when none is ready. Other
// calls ignore it.
func WithWait() TakeOption { return waitOption{} }

// takeOptions splits Take's options into WithWait and the secret options,
// refusing any other.
func takeOptions(opts []TakeOption) (wait bool, rest []Option, err error) {
	for _, o := range opts {
		switch o.(type) {
		case nil:
			continue
		case waitOption:
			wait = true
			continue
		}
		c := &config{}
		o.applySandbox(c)
		c.extConfig = extConfig{}
		if !reflect.ValueOf(*c).IsZero() {
			return false, nil, newError(ReasonInvalidArgument, "pool: Take accepts WithWait and the secret options only (the sandbox's other settings are the pool's Create options)")
		}
		rest = append(rest, o)
	}
	return wait, rest, nil
}

// Take hands out a sandbox: the oldest ready slot, resumed (Sandbox.Resume:
// RUNNING and its daemon answering; a slot that cannot be resumed is
// killed and the next one tried), else, when no slot is ready, a sandbox
// created on the spot with the pool's Create options (or, WithWait, the
// next slot that becomes ready). Either way the pool then refills, once
// the sandbox is handed out (a create beside the resume would slow it). The
// sandbox is the caller's: Close does not kill it. With secret options
// (see TakeOption) a resumed slot's gateways, placeholders and header
// rules are configured after its resume; if that fails the slot is killed
// and the error returned. After Close, Take is ErrPoolClosed.
func (p *SandboxPool) Take(ctx context.Context, opts ...TakeOption) (*Sandbox, error) {
	wait, extra, err := takeOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg := newConfig(append(slices.Clone(p.create), extra...))
	if err := cfg.checkExtensions(); err != nil {
		return nil, err
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, poolClosed()
		}
		if len(p.ready) > 0 {
			slot := p.ready[0]
			p.ready = slices.Delete(p.ready, 0, 1)
			live := p.live[slot.ID]
			delete(p.live, slot.ID)
			short := p.shortLived(slot.ExpiresAt)
			if short {
				p.stats.Swept++
			}
			p.saveLocked()
			p.mu.Unlock()
			if short {
				_ = p.kill(context.WithoutCancel(ctx), slot.ID)
				p.refill()
				continue
			}
			if len(extra) > 0 {
				live = nil
			}
			sbx, retry, err := p.handOut(ctx, slot, live, extra)
			if err == nil {
				// The refill starts a moment after the hand-out: a
				// create running beside the resume, or beside the first
				// commands that follow a Take at once, slows them down
				// (the local platform's own pool waits the same way).
				p.refillAfter(refillQuiet)
			} else {
				p.refill()
			}
			if err == nil {
				p.count(func(s *PoolStats) { s.Hits++; s.Taken++ })
				return sbx, nil
			}
			_ = p.kill(context.WithoutCancel(ctx), slot.ID)
			if !retry || ctx.Err() != nil {
				return nil, err
			}
			p.count(func(s *PoolStats) { s.ResumeFailures++ })
			p.base.logger.Debug("pool: a slot did not resume; trying the next", "sandbox", slot.ID, "err", err)
			continue
		}
		if !wait {
			p.mu.Unlock()
			sbx, err := Create(ctx, append(slices.Clone(p.create), extra...)...)
			p.refill()
			if err != nil {
				return nil, err
			}
			p.count(func(s *PoolStats) { s.Fallbacks++; s.Taken++ })
			return sbx, nil
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// handOut resumes slot (through live, its Sandbox from the fill, when
// given) and configures its secrets. retry is true when the slot itself
// failed (gone, not resumable): the next one may do.
func (p *SandboxPool) handOut(ctx context.Context, slot PoolSlot, live *Sandbox, extra []Option) (_ *Sandbox, retry bool, _ error) {
	if live != nil {
		if err := live.resumeSlot(ctx); err != nil {
			live.dp.close()
			return nil, true, err
		}
		return live, false, nil
	}
	opts := append(slices.Clone(p.create), extra...)
	cfg := newConfig(append(slices.Clone(opts), WithAccessToken(slot.AccessToken)))
	vm, err := p.mv.GetMicrovm(ctx, slot.ID)
	if err != nil {
		return nil, true, controlPlaneErr(cfg, slot.ID, err)
	}
	if ended(vm.State) {
		return nil, true, endedErr(cfg, vm)
	}
	s := newSandbox(cfg, p.mv, vm, slot.AccessToken)
	s.createOpts = opts
	if err := s.resumeSlot(ctx); err != nil {
		s.dp.close()
		return nil, true, err
	}
	if err := s.configureOnly(ctx); err != nil {
		s.dp.close()
		return nil, false, err
	}
	return s, false, nil
}

// Stats returns the pool's counters.
func (p *SandboxPool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.stats
	st.Ready, st.Filling, st.KeepsRunning = len(p.ready), p.fillers, p.keepAwake
	return st
}

// Close stops filling and sweeping, waits for the pool's background work
// (a sandbox being created or paused then is killed), kills the ready
// slots and empties the store. The sandboxes Take handed out are left
// alone. ctx bounds the kills; their errors are joined. Closing a closed
// pool does nothing.
func (p *SandboxPool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.broadcastLocked()
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	slots := p.ready
	p.ready = nil
	clear(p.live)
	p.mu.Unlock()
	var errs []error
	for _, s := range slots {
		if err := p.kill(ctx, s.ID); err != nil {
			errs = append(errs, err)
		}
	}
	p.mu.Lock()
	p.saveLocked()
	p.mu.Unlock()
	return errors.Join(errs...)
}

func poolClosed() error { return newError(ReasonShuttingDown, "pool: closed", ErrPoolClosed) }

func (p *SandboxPool) count(f func(*PoolStats)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(&p.stats)
}

// shortLived reports an expiry within MinRemaining.
func (p *SandboxPool) shortLived(expires time.Time) bool {
	return !expires.IsZero() && time.Until(expires) < p.cfg.MinRemaining
}

// broadcastLocked wakes the Takes waiting for a change.
func (p *SandboxPool) broadcastLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// saveLocked writes the records: the ready slots, then the filling ones.
// A store that fails is logged: the pool goes on in memory.
func (p *SandboxPool) saveLocked() {
	recs := slices.Clone(p.ready)
	for _, id := range slices.Sorted(maps.Keys(p.filling)) {
		recs = append(recs, p.filling[id])
	}
	if err := p.store.Save(context.WithoutCancel(p.ctx), recs); err != nil {
		p.base.logger.Warn("pool: cannot save its records", "err", err)
	}
}

// refill is refillLocked with the lock taken.
func (p *SandboxPool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refillLocked()
}

// refillQuiet is how long after a hand-out the refill waits.
const refillQuiet = 150 * time.Millisecond

// refillAfter refills the pool after d, unless it closes first.
func (p *SandboxPool) refillAfter(d time.Duration) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		if backoff.Sleep(p.ctx, d) == nil {
			p.refill()
		}
	}()
}

// refillLocked starts fills up to the pool's size, FillConcurrency at a
// time.
func (p *SandboxPool) refillLocked() {
	for !p.closed && len(p.ready)+p.fillers < p.cfg.Size && p.fillers < p.cfg.FillConcurrency {
		p.fillers++
		p.wg.Add(1)
		go p.fill()
	}
}

// fillBackoff is the wait after the n-th failed fill in a row.
func fillBackoff(n int) time.Duration {
	return backoff.Nth(time.Second, time.Minute, n)
}

// fill creates one slot: Create, record, Warmup, Pause (unless the
// platform cannot), ready. A failure waits fillBackoff before this filler gives
// way, so that a broken configuration does not spin.
func (p *SandboxPool) fill() {
	defer p.wg.Done()
	ok := p.fillOne()
	p.mu.Lock()
	if !ok && !p.closed {
		p.stats.FillFailures++
		p.failStreak++
		delay := fillBackoff(p.failStreak)
		p.mu.Unlock()
		_ = backoff.Sleep(p.ctx, delay)
		p.mu.Lock()
	} else {
		p.failStreak = 0
	}
	p.fillers--
	p.refillLocked()
	p.mu.Unlock()
}

func (p *SandboxPool) fillOne() bool {
	start := time.Now()
	sbx, err := Create(p.ctx, p.create...)
	if err != nil {
		if p.ctx.Err() == nil {
			p.base.logger.Debug("pool: create failed", "err", err)
		}
		return false
	}
	defer sbx.dp.close()
	slot := PoolSlot{ID: sbx.ID(), AccessToken: sbx.AccessToken(), CreatedAt: start.UTC(), ExpiresAt: start.Add(p.lifetime).UTC(), Filling: true}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = p.killLater(slot.ID)
		return true
	}
	p.filling[slot.ID] = slot
	p.saveLocked()
	keepAwake := p.keepAwake
	p.mu.Unlock()
	if p.cfg.Warmup != nil {
		if err := p.cfg.Warmup(p.ctx, sbx); err != nil {
			if p.ctx.Err() == nil {
				p.base.logger.Debug("pool: warmup failed", "sandbox", slot.ID, "err", err)
			}
			p.dropFilling(slot.ID)
			return p.ctx.Err() != nil
		}
	}
	if !keepAwake {
		if err := sbx.Pause(p.ctx); err != nil {
			if ReasonOf(err) == ReasonInvalidArgument && p.ctx.Err() == nil {
				// The platform cannot pause (a local platform without
				// root): the slots stay running from now on.
				p.mu.Lock()
				p.keepAwake = true
				p.mu.Unlock()
				p.base.logger.Info("pool: the platform cannot pause sandboxes; the pool keeps its slots running")
			} else {
				p.dropFilling(slot.ID)
				return p.ctx.Err() != nil
			}
		}
	}
	p.mu.Lock()
	delete(p.filling, slot.ID)
	if p.closed {
		p.saveLocked()
		p.mu.Unlock()
		_ = p.killLater(slot.ID)
		return true
	}
	slot.Filling = false
	p.ready = append(p.ready, slot)
	p.live[slot.ID] = sbx
	p.saveLocked()
	p.broadcastLocked()
	p.mu.Unlock()
	return true
}

// dropFilling forgets a slot that failed while filling and kills its
// sandbox.
func (p *SandboxPool) dropFilling(id string) {
	p.mu.Lock()
	delete(p.filling, id)
	p.saveLocked()
	p.mu.Unlock()
	_ = p.killLater(id)
}

// sweeper sweeps at once, then every SweepInterval, until Close.
func (p *SandboxPool) sweeper() {
	defer p.wg.Done()
	t := time.NewTicker(p.cfg.SweepInterval)
	defer t.Stop()
	for {
		p.sweep(p.ctx)
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sweep drops the ready slots whose sandbox is gone, ended or would end
// within MinRemaining, kills them, and refills.
func (p *SandboxPool) sweep(ctx context.Context) {
	p.mu.Lock()
	slots := slices.Clone(p.ready)
	p.mu.Unlock()
	drop := map[string]bool{}
	for _, s := range slots {
		if ctx.Err() != nil {
			return
		}
		vm, err := p.mv.GetMicrovm(ctx, s.ID)
		switch {
		case errors.Is(err, microvms.ErrNotFound):
			drop[s.ID] = true
		case err != nil:
			// Unknown (throttled, unreachable): the next sweep or Take
			// decides.
		case ended(vm.State):
			p.base.sawEnded(vm.MicrovmID, vm.State)
			drop[s.ID] = true
		case p.shortLived(infoOf(vm).ExpiresAt) || p.shortLived(s.ExpiresAt):
			drop[s.ID] = true
		case vm.State == microvmsapi.StateRunning && !p.keepAwakeNow():
			// Resumed behind the pool's back (an idle policy's
			// auto-resume, a request): it is no longer a clean paused
			// slot.
			drop[s.ID] = true
		}
	}
	p.mu.Lock()
	var kill []string
	p.ready = slices.DeleteFunc(p.ready, func(s PoolSlot) bool {
		if drop[s.ID] {
			kill = append(kill, s.ID)
			delete(p.live, s.ID)
			return true
		}
		return false
	})
	if len(kill) > 0 {
		p.stats.Swept += len(kill)
		p.saveLocked()
	}
	p.refillLocked()
	p.mu.Unlock()
	for _, id := range kill {
		_ = p.kill(ctx, id)
	}
}

func (p *SandboxPool) keepAwakeNow() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keepAwake
}

// kill terminates a slot's sandbox and forgets its token; a sandbox that
// is already gone is not an error.
func (p *SandboxPool) kill(ctx context.Context, id string) error {
	err := p.mv.TerminateMicrovm(ctx, id)
	if err != nil && !errors.Is(err, microvms.ErrNotFound) {
		return controlPlaneErr(p.base, id, err)
	}
	p.base.forget(id)
	return nil
}

// killLater kills a sandbox of the background work, which Close may have
// cancelled already.
func (p *SandboxPool) killLater(id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), time.Minute)
	defer cancel()
	return p.kill(ctx, id)
}
