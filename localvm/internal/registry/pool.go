package registry

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
)

// The pool of pre-booted sandboxes (see the package documentation).

// MaxPrebooted bounds Options.Prebooted.
const MaxPrebooted = 16

// Refill back-off after a failed boot: from poolRetryMin, doubling, up to
// poolRetryMax. A microVM that ends resets it (it may have freed what the
// boot lacked: an address, a uid block).
const (
	poolRetryMin = 100 * time.Millisecond
	poolRetryMax = 10 * time.Second
)

// refillSettle is how long the refill waits after the last RunMicrovm
// boot (a hand-out's included) has answered its run hook: a client's first
// commands follow its create at once, and on a small machine a boot beside
// them would slow them down.
const refillSettle = 150 * time.Millisecond

// pool is the registry's pool of pre-booted sandboxes. Fields marked "mu"
// are guarded by Registry.mu.
type pool struct {
	target int // Options.Prebooted; 0: no pool

	ready   []*pooled // mu: booted, /ready answered, oldest first
	booting bool      // mu: the refill goroutine is launching one
	// users counts RunMicrovm boots in progress, fresh launches and
	// hand-outs alike, until their run hook has answered (mu): the refill
	// waits for none, so that it never competes with them.
	users    int       // mu
	lastUser time.Time // mu: when the last of them ended
	retryAt  time.Time // mu: no refill before (after a failed boot)
	failures int       // mu: failed boots in a row

	kick chan struct{} // buffered 1: wakes the refill goroutine
}

// pooled is one pre-booted sandbox: launched under a microVM id of its
// own, which becomes the id of the microVM it is handed out to.
type pooled struct {
	id, endpoint string
	dir          string
	inst         launcher.Instance
	// gone is closed when it leaves the pool: handed out, discarded or
	// dropped (its rayd exited).
	gone chan struct{}
}

// on reports whether the registry keeps a pool.
func (p *pool) on() bool { return p.target > 0 }

// kickPool wakes the refill goroutine.
func (r *Registry) kickPool() {
	if !r.pool.on() {
		return
	}
	select {
	case r.pool.kick <- struct{}{}:
	default:
	}
}

// poolSpec is the spec every pooled sandbox is launched with: no Internet
// access and the default limits; Assign gives it the request's at
// hand-out.
func poolSpec(id, dir string) launcher.Spec {
	return launcher.Spec{ID: id, LogPath: filepath.Join(dir, LogFileName), Dir: dir}
}

// poolFits reports whether a request's spec can be served by a pooled
// sandbox: same limits (Assign cannot change them) and no environment of
// rayd's own. Its Internet access is applied at hand-out.
func poolFits(spec launcher.Spec) bool {
	return spec.MemoryBytes == 0 && spec.PidsMax == 0 && len(spec.Env) == 0 && spec.Template == nil
}

// takePooledLocked takes the oldest pooled sandbox whose rayd is alive out
// of the pool, or returns nil. Dead ones are left to their watchers, which
// drop and replace them.
func (r *Registry) takePooledLocked(spec launcher.Spec) *pooled {
	if !r.pool.on() || !poolFits(spec) {
		return nil
	}
	for i, p := range r.pool.ready {
		select {
		case <-p.inst.Done():
			continue
		default:
		}
		r.pool.ready = slices.Delete(r.pool.ready, i, i+1)
		close(p.gone)
		return p
	}
	return nil
}

// userBootDone ends one of the users' boots the refill waits for.
func (r *Registry) userBootDone() {
	if !r.pool.on() {
		return
	}
	r.mu.Lock()
	r.pool.users--
	r.pool.lastUser = time.Now()
	idle := r.pool.users == 0
	r.mu.Unlock()
	if idle {
		r.kickPool()
	}
}

// poolWantLocked reports whether the refill should boot a sandbox now,
// and, when only the back-off after a failure keeps it from it, how long
// until it may.
func (r *Registry) poolWantLocked() (bool, time.Duration) {
	p := &r.pool
	if r.closed || r.draining || p.booting || len(p.ready) >= p.target || p.users > 0 ||
		r.activeLocked()+len(p.ready)+1 > r.max {
		return false, 0
	}
	wait := time.Until(p.retryAt)
	if !p.lastUser.IsZero() {
		wait = max(wait, refillSettle-time.Since(p.lastUser))
	}
	if wait > 0 {
		return false, wait
	}
	return true, 0
}

// refill is the goroutine that keeps the pool full: one boot at a time,
// only while no RunMicrovm boot is in progress (and refillSettle after the
// last), and only into capacity users leave free. It returns when the
// registry closes.
func (r *Registry) refill() {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return
		}
		want, wait := r.poolWantLocked()
		if want {
			r.pool.booting = true
		}
		r.mu.Unlock()
		if !want {
			var timer *time.Timer
			var fire <-chan time.Time
			if wait > 0 {
				timer = time.NewTimer(wait)
				fire = timer.C
			}
			select {
			case <-r.pool.kick:
			case <-fire:
			case <-r.base.Done():
			}
			if timer != nil {
				timer.Stop()
			}
			continue
		}

		start := time.Now()
		p, err := r.bootPooled()
		r.mu.Lock()
		r.pool.booting = false
		if err != nil {
			r.pool.failures++
			n := r.pool.failures
			r.pool.retryAt = time.Now().Add(min(poolRetryMin<<min(n-1, 10), poolRetryMax))
			closed := r.closed
			r.mu.Unlock()
			switch {
			case closed:
			case n == 1:
				r.log.Warn("registry: cannot boot a pre-booted sandbox; retrying with back-off", "err", err)
			default:
				r.log.Debug("registry: cannot boot a pre-booted sandbox", "failures", n, "err", err)
			}
			continue
		}
		keep := !r.closed && len(r.pool.ready) < r.pool.target && r.activeLocked()+len(r.pool.ready)+1 <= r.max
		recovered := false
		if keep {
			recovered = r.pool.failures > 0
			r.pool.failures, r.pool.retryAt = 0, time.Time{}
			r.pool.ready = append(r.pool.ready, p)
			r.wg.Add(1)
			go r.watchPooled(p)
		}
		ready := len(r.pool.ready)
		r.mu.Unlock()
		if !keep {
			r.discardPooled(p)
			continue
		}
		if recovered {
			r.log.Info("registry: pre-booted sandboxes boot again")
		}
		r.log.Debug("registry: pre-booted sandbox ready", "microvm", p.id, "boot", time.Since(start).Round(time.Millisecond), "pool", ready)
	}
}

// bootPooled launches one sandbox for the pool and waits until rayd's
// ready hook answers 200. Its directory is <StateDir>/vms/<id>, without a
// state file: a platform killed with its pool leaves only what the
// start-up sweep removes (Launcher.Sweep keeps nothing it is not told to,
// and sandbox directories without a state file are deleted).
func (r *Registry) bootPooled() (*pooled, error) {
	u, err := uuid.NewRandom()
	if err != nil {
		return nil, fmt.Errorf("registry: uuid: %w", err)
	}
	id := "microvm-" + u.String()
	dir := filepath.Join(r.vmsDir, id)
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	inst, err := r.launcher.Launch(r.base, poolSpec(id, dir))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	p := &pooled{id: id, endpoint: u.String() + EndpointSuffix, dir: dir, inst: inst, gone: make(chan struct{})}
	if err := r.postReady(r.base, inst); err != nil {
		r.discardPooled(p)
		return nil, fmt.Errorf("registry: ready hook: %w", err)
	}
	return p, nil
}

// postReady POSTs rayd's ready hook until it answers 200 (503 means rayd
// is still warming up), within the run hook's timeout.
func (r *Registry) postReady(ctx context.Context, inst launcher.Instance) error {
	return r.postHookRetry(ctx, inst, "ready", nil, r.runTO, true)
}

// watchPooled drops p from the pool, and has it replaced, when its rayd
// exits while it waits there.
func (r *Registry) watchPooled(p *pooled) {
	defer r.wg.Done()
	select {
	case <-p.gone:
		return
	case <-p.inst.Done():
	}
	r.mu.Lock()
	i := slices.Index(r.pool.ready, p)
	if i >= 0 {
		r.pool.ready = slices.Delete(r.pool.ready, i, i+1)
		close(p.gone)
	}
	r.mu.Unlock()
	if i < 0 {
		return // taken meanwhile: its new owner sees rayd gone
	}
	r.log.Warn("registry: a pre-booted sandbox's rayd exited; replacing it", "microvm", p.id)
	r.discardPooled(p)
	r.kickPool()
}

// discardPooled destroys a sandbox that left the pool without being
// handed out, and its directory. Nobody ever saw it: there is no
// terminate hook to call.
func (r *Registry) discardPooled(p *pooled) {
	ctx, cancel := context.WithTimeout(context.Background(), r.teardownTO)
	defer cancel()
	if err := p.inst.Terminate(ctx); err != nil {
		r.log.Warn("registry: pre-booted sandbox teardown failed; the next start sweeps what is left", "microvm", p.id, "err", err)
		return
	}
	if err := os.RemoveAll(p.dir); err != nil {
		r.log.Warn("registry: cannot remove a pre-booted sandbox's directory", "microvm", p.id, "err", err)
	}
}

// discardAll discards ps in the background (counted in wg): Close does
// it before it waits.
func (r *Registry) discardAll(ps []*pooled) {
	for _, p := range ps {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.discardPooled(p)
		}()
	}
}

// Prebooted reports how many pre-booted sandboxes wait in the pool and
// how many it keeps (0 when there is no pool).
func (r *Registry) Prebooted() (ready, target int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pool.ready {
		select {
		case <-p.inst.Done():
		default:
			ready++
		}
	}
	return ready, r.pool.target
}

// noPoolText is the sentence of a PoolSupport error: "pre-booted
// sandboxes need the root platform: this platform runs rootless."
func noPoolText(err error) string {
	t := strings.TrimPrefix(err.Error(), "launcher: ")
	if t == "" {
		t = "pre-booted sandboxes are not supported by this platform"
	}
	return strings.TrimSuffix(t, ".") + "."
}
