package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// LogFileName is rayd's output file inside a sandbox's directory.
const LogFileName = "rayd.log"

// VMsDir is the directory of the sandboxes of the platform with state
// directory stateDir: one directory and one state file per microVM.
func VMsDir(stateDir string) string { return filepath.Join(stateDir, "vms") }

// LogPath is where the platform with state directory stateDir keeps the
// output of sandbox id's rayd.
func LogPath(stateDir, id string) string { return filepath.Join(VMsDir(stateDir), id, LogFileName) }

// lifecycle is the one goroutine that owns v's sandbox: it launches it
// (unless inst is an adopted one), calls the run hook, suspends and
// resumes it, waits for a reason to stop, and tears it down. It returns
// early, leaving the sandbox running (or frozen), when the registry
// closes.
func (r *Registry) lifecycle(v *vm, startCtx context.Context, payload string, inst launcher.Instance) {
	defer r.wg.Done()
	if inst == nil {
		inst = r.boot(v, startCtx, payload)
		if inst == nil {
			r.finish(v)
			return
		}
	}
	r.watch(v, inst)
}

// rootEnv is what the image localplatform.RootImage adds to rayd's
// environment: root allowed (the security model's "RAYITO_ALLOW_ROOT=1 in
// the image"). It reaches rayd only through the launcher, never through
// anything the sandbox's code can write.
const rootEnv = "RAYITO_ALLOW_ROOT=1"

// sandboxSpec is the launcher's spec of a microVM's sandbox of image.
func sandboxSpec(id, dir, image string, egress []string) launcher.Spec {
	spec := launcher.Spec{
		ID:       id,
		Internet: hasConnector(egress, microvmsapi.ConnectorInternet),
		Dir:      dir,
	}
	if image == localplatform.RootImage {
		spec.Env = []string{rootEnv}
	}
	if dir != "" {
		spec.LogPath = filepath.Join(dir, LogFileName)
	}
	return spec
}

// boot launches v's sandbox, or assigns the pre-booted one Run took for
// it, and calls its run hook. It returns nil when nothing was launched (v
// is then TERMINATING); otherwise the instance, with v RUNNING or, when
// the run hook failed, TERMINATING.
func (r *Registry) boot(v *vm, ctx context.Context, payload string) launcher.Instance {
	defer r.userBootDone() // after the run hook: the refill may go on
	defer v.markBooted()
	defer func() {
		r.mu.Lock()
		v.cancelStart()
		r.mu.Unlock()
	}()
	spec := v.image.spec(v.id, v.dir, v.pub.EgressNetworkConnectors)
	var inst launcher.Instance
	if p := v.pooled; p != nil {
		var ok bool
		if inst, ok = r.assignPooled(v, ctx, p, spec); !ok {
			return nil
		}
	}
	if inst == nil {
		var err error
		if inst, err = r.launcher.Launch(ctx, spec); err != nil {
			reason := launchFailure(err)
			if r.base.Err() != nil {
				reason = ReasonPlatformStopped
			}
			r.mu.Lock()
			changed := r.requestTerminateLocked(v, reason)
			r.mu.Unlock()
			if changed {
				r.log.Warn("registry: launch failed", "microvm", v.id, "err", err)
			}
			return nil
		}
	}
	oom, oomOK := inst.OOMBaseline()
	rec := inst.Record()
	r.mu.Lock()
	v.inst, v.rec = inst, &rec
	v.gen++
	r.mu.Unlock()
	r.persist(v)

	if err := r.postRun(ctx, inst, v.id, payload); err != nil {
		var reason string
		switch {
		case r.base.Err() != nil:
			reason = ReasonPlatformStopped
		case errors.Is(err, errExited):
			reason = instanceExitReason(inst, oom, oomOK)
		default:
			reason = runFailureReason(err)
		}
		r.mu.Lock()
		changed := r.requestTerminateLocked(v, reason)
		r.mu.Unlock()
		if changed {
			r.log.Warn("registry: run hook failed", "microvm", v.id, "reason", reason)
			r.persist(v)
		}
		return inst
	}
	r.mu.Lock()
	changed := v.pub.State == microvmsapi.StatePending
	if changed {
		r.setStateLocked(v, microvmsapi.StateRunning)
	}
	r.mu.Unlock()
	if changed {
		r.log.Info("registry: microVM running", "microvm", v.id)
		r.persist(v)
	}
	return inst
}

// assignPooled gives the pre-booted sandbox p, taken for v, the egress
// and limits of v's request. It returns p's instance, or nil when p
// cannot serve (its rayd died since it was taken, or Assign failed): p is
// then destroyed and v boots a sandbox of its own under the same id. ok
// is false when not even that is possible (v is then TERMINATING).
func (r *Registry) assignPooled(v *vm, ctx context.Context, p *pooled, spec launcher.Spec) (inst launcher.Instance, ok bool) {
	start := time.Now()
	err := p.inst.Assign(ctx, launcher.Assignment{Internet: spec.Internet, MemoryBytes: spec.MemoryBytes, PidsMax: spec.PidsMax})
	if err == nil {
		r.log.Info("registry: pre-booted sandbox handed out", "microvm", v.id, "assign", time.Since(start).Round(time.Microsecond))
		return p.inst, true
	}
	r.log.Warn("registry: the pre-booted sandbox cannot serve; booting a fresh one", "microvm", v.id, "err", err)
	tctx, cancel := context.WithTimeout(context.Background(), r.teardownTO)
	terr := p.inst.Terminate(tctx)
	cancel()
	r.mu.Lock()
	v.inst, v.rec = nil, nil
	v.gen++
	changed := false
	if terr != nil {
		// Its cgroups or veth, named after the id, may be left: the id
		// cannot be launched again.
		changed = r.requestTerminateLocked(v, ReasonLaunchFailed)
	}
	r.mu.Unlock()
	if terr != nil {
		if changed {
			r.log.Warn("registry: launch failed", "microvm", v.id, "err", terr)
		}
		return nil, false
	}
	r.persist(v)
	return nil, true
}

// watcher is the state of one watch: what only the lifecycle goroutine
// touches.
type watcher struct {
	r    *Registry
	v    *vm
	inst launcher.Instance
	// ctx bounds the hooks and freezer calls of suspend and resume: it
	// ends when v must stop, rayd exits or the registry closes.
	ctx context.Context

	// Idle policy (zero without one).
	maxIdle, maxSuspended time.Duration
	lastActive            time.Time // monotonic
	lastBytes             uint64

	// OOM kill counter at the last sample taken while nothing was killing
	// rayd (launcher.Instance.OOMBaseline).
	oom   uint64
	oomOK bool

	lastLifecycle time.Time // the last suspension rayd asked for
}

// watch runs v's sandbox until it must stop, then tears it down; or
// returns, leaving the sandbox alone, when the registry closes.
func (r *Registry) watch(v *vm, inst launcher.Instance) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-v.stop:
		case <-inst.Done():
		case <-r.base.Done():
		case <-ended:
		}
		cancel()
	}()
	w := &watcher{r: r, v: v, inst: inst, ctx: ctx, lastActive: time.Now()}
	w.oom, w.oomOK = inst.OOMBaseline()
	r.mu.Lock()
	if p := v.pub.IdlePolicy; p != nil {
		w.maxIdle = time.Duration(p.MaxIdleDurationSeconds) * r.idleUnit
		w.maxSuspended = time.Duration(p.SuspendedDurationSeconds) * r.idleUnit
	}
	r.mu.Unlock()
	tick := time.Second // OOM counter samples
	if w.maxIdle > 0 {
		tick = min(max(w.maxIdle/20, 5*time.Millisecond), time.Second)
	}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()

	r.mu.Lock()
	adoptedSuspended := v.pub.State == microvmsapi.StateSuspended
	r.mu.Unlock()
	if adoptedSuspended {
		w.refreeze()
		r.persist(v)
	}
	w.converge() // an adopted SUSPENDING sandbox is suspended again
	for {
		select {
		case <-v.stop:
			r.teardown(v, inst)
			return
		default:
		}
		select {
		case <-v.stop:
			r.teardown(v, inst)
			return
		case <-inst.Done():
			reason := instanceExitReason(inst, w.oom, w.oomOK)
			r.mu.Lock()
			changed := r.requestTerminateLocked(v, reason)
			r.mu.Unlock()
			if changed {
				r.log.Info("registry: rayd exited", "microvm", v.id, "reason", reason)
				r.persist(v)
			}
			r.teardown(v, inst)
			return
		case <-r.base.Done():
			select {
			case <-v.stop: // a termination raced with Close: finish it
				r.teardown(v, inst)
			default:
			}
			return
		case <-v.kick:
			w.converge()
		case <-inst.SuspendRequests():
			w.lifecycleRequest()
		case <-ticker.C:
			if n, ok := inst.OOMBaseline(); ok {
				w.oom, w.oomOK = n, true
			}
			w.checkIdle()
		}
	}
}

// lifecycleRequest suspends v because rayd asked (its lifecycle deadline
// with on_timeout=pause), at most once per lifecycleInterval.
func (w *watcher) lifecycleRequest() {
	r, v := w.r, w.v
	if !w.lastLifecycle.IsZero() && time.Since(w.lastLifecycle) < lifecycleInterval {
		r.log.Debug("registry: suspend request from rayd ignored (too soon after the last)", "microvm", v.id)
		return
	}
	w.lastLifecycle = time.Now()
	r.mu.Lock()
	var err error
	if v.pub.State == microvmsapi.StateRunning {
		err = r.setWantLocked(v, wantSuspended, "rayd")
	}
	r.mu.Unlock()
	if err != nil {
		r.log.Warn("registry: suspend request from rayd refused", "microvm", v.id, "err", err)
		return
	}
	r.persist(v)
	w.converge()
}

// checkIdle applies v's idle policy: suspend after maxIdle without
// traffic, terminate after maxSuspended suspended.
func (w *watcher) checkIdle() {
	if w.maxIdle <= 0 {
		return
	}
	r, v := w.r, w.v
	snap := v.meter.Read()
	t := time.Now()
	if bytes := snap.In + snap.Out; snap.InFlight > 0 || bytes != w.lastBytes {
		w.lastBytes = bytes
		w.lastActive = t
	}
	if snap.LastEnd.After(w.lastActive) {
		w.lastActive = snap.LastEnd
	}
	r.mu.Lock()
	state := v.pub.State
	var err error
	suspend := state == microvmsapi.StateRunning && v.want == wantRunning && t.Sub(w.lastActive) >= w.maxIdle
	if suspend {
		err = r.setWantLocked(v, wantSuspended, "idle")
	}
	r.mu.Unlock()
	switch {
	case err != nil:
		r.log.Warn("registry: idle suspension refused", "microvm", v.id, "err", err)
	case suspend:
		r.log.Info("registry: microVM idle", "microvm", v.id, "idle", t.Sub(w.lastActive).Round(time.Millisecond))
		r.persist(v)
		w.converge()
	}
	w.checkSuspended()
}

// checkSuspended terminates v (idle) once it has been SUSPENDED for the
// policy's suspendedDurationSeconds.
func (w *watcher) checkSuspended() {
	if w.maxIdle <= 0 {
		return
	}
	r, v := w.r, w.v
	r.mu.Lock()
	changed := v.pub.State == microvmsapi.StateSuspended && v.want == wantSuspended && v.suspendedAt != nil &&
		time.Since(*v.suspendedAt) >= w.maxSuspended && r.requestTerminateLocked(v, ReasonIdle)
	r.mu.Unlock()
	if changed {
		r.log.Info("registry: microVM terminating", "microvm", v.id, "reason", ReasonIdle)
		r.persist(v)
	}
}

// converge works until v's state is what is wanted: RUNNING → SUSPENDING
// → (suspend hook, freeze) → SUSPENDED, and SUSPENDED → (thaw, resume
// hook) → RUNNING. It returns early when v must stop, rayd exits or the
// registry closes (w.ctx ends); a later Open finishes the work.
func (w *watcher) converge() {
	r, v := w.r, w.v
	for w.ctx.Err() == nil {
		r.mu.Lock()
		state, want, dirty := v.pub.State, v.want, v.dirty
		var step func()
		switch {
		case want == wantSuspended && state == microvmsapi.StateRunning:
			r.setStateLocked(v, microvmsapi.StateSuspending)
			step = func() {}
		case want == wantSuspended && state == microvmsapi.StateSuspending:
			v.dirty = true
			step = w.suspend
		case want == wantRunning && state == microvmsapi.StateSuspending && !dirty:
			// Nothing was done yet: it never stopped running.
			r.setStateLocked(v, microvmsapi.StateRunning)
			step = func() {}
		case want == wantRunning && (state == microvmsapi.StateSuspending || state == microvmsapi.StateSuspended):
			step = w.resume
		}
		r.mu.Unlock()
		if step == nil {
			w.checkSuspended()
			return
		}
		r.persist(v)
		step()
		r.persist(v)
	}
}

// opContext bounds one hook or freezer call.
func (w *watcher) opContext(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(w.ctx, d)
}

// suspend POSTs the suspend hook, freezes the sandbox and makes v
// SUSPENDED. A freeze that fails thaws the sandbox again and puts v back
// to RUNNING.
func (w *watcher) suspend() {
	r, v, inst := w.r, w.v, w.inst
	start := time.Now()
	ctx, cancel := w.opContext(r.suspendTO)
	status, err := r.postHook(ctx, inst.HooksAddr(), "suspend", nil)
	cancel()
	if w.ctx.Err() != nil {
		return
	}
	if err != nil || status != http.StatusOK {
		// rayd always answers 200; whatever it said, freeze.
		r.log.Debug("registry: suspend hook did not answer 200 (ignored)", "microvm", v.id, "status", status, "err", err)
	}
	ctx, cancel = w.opContext(FreezerTimeout)
	err = inst.Freeze(ctx)
	cancel()
	if w.ctx.Err() != nil {
		return
	}
	if err != nil {
		r.log.Error("registry: cannot freeze the sandbox; it keeps running", "microvm", v.id, "err", err)
		w.thawAndResume()
		r.mu.Lock()
		if v.pub.State == microvmsapi.StateSuspending {
			v.want = wantRunning
			v.dirty = false
			r.setStateLocked(v, microvmsapi.StateRunning)
		}
		r.mu.Unlock()
		w.lastActive = time.Now()
		return
	}
	t := now()
	r.mu.Lock()
	changed := v.pub.State == microvmsapi.StateSuspending
	if changed {
		v.suspendedAt = &t
		r.setStateLocked(v, microvmsapi.StateSuspended)
	}
	r.mu.Unlock()
	if changed {
		r.log.Info("registry: microVM suspended", "microvm", v.id, "duration", time.Since(start).Round(time.Millisecond))
	}
}

// refreeze freezes an adopted SUSPENDED sandbox again (a platform may have
// stopped while it was resuming it); a failure terminates it.
func (w *watcher) refreeze() {
	r, v := w.r, w.v
	ctx, cancel := w.opContext(FreezerTimeout)
	err := w.inst.Freeze(ctx)
	cancel()
	if w.ctx.Err() != nil {
		return
	}
	t := now()
	r.mu.Lock()
	changed := false
	if err != nil {
		changed = r.requestTerminateLocked(v, ReasonFreezerFailed)
	} else if v.suspendedAt == nil {
		v.suspendedAt = &t
		v.gen++
	}
	r.mu.Unlock()
	if changed {
		r.log.Error("registry: cannot freeze an adopted suspended sandbox", "microvm", v.id, "err", err)
		r.persist(v)
	}
}

// thawAndResume thaws the sandbox and POSTs the resume hook, ignoring
// what happens (a suspension that failed).
func (w *watcher) thawAndResume() {
	ctx, cancel := w.opContext(FreezerTimeout)
	_ = w.inst.Thaw(ctx)
	cancel()
	ctx, cancel = w.opContext(w.r.resumeTO)
	_, _ = w.r.postHook(ctx, w.inst.HooksAddr(), "resume", nil)
	cancel()
}

// resume thaws the sandbox and POSTs the resume hook until it answers
// 200, then makes v RUNNING. A thaw that fails, a resume hook answering
// anything else or not within the timeout terminate v (platform_error).
func (w *watcher) resume() {
	r, v, inst := w.r, w.v, w.inst
	start := time.Now()
	ctx, cancel := w.opContext(FreezerTimeout)
	err := inst.Thaw(ctx)
	cancel()
	if w.ctx.Err() != nil {
		return
	}
	reason := ""
	if err != nil {
		r.log.Error("registry: cannot thaw the sandbox", "microvm", v.id, "err", err)
		reason = ReasonFreezerFailed
	} else if err := r.postHookRetry(w.ctx, inst, "resume", nil, r.resumeTO, false); err != nil {
		if w.ctx.Err() != nil {
			return
		}
		reason = resumeFailureReason(err)
	}
	r.mu.Lock()
	changed := false
	if reason != "" {
		changed = r.requestTerminateLocked(v, reason)
	} else if s := v.pub.State; s == microvmsapi.StateSuspended || s == microvmsapi.StateSuspending {
		v.dirty = false
		v.suspendedAt = nil
		r.setStateLocked(v, microvmsapi.StateRunning)
		changed = true
	}
	r.mu.Unlock()
	switch {
	case reason != "" && changed:
		r.log.Warn("registry: resume failed", "microvm", v.id, "reason", reason)
	case changed:
		w.lastActive = time.Now()
		r.log.Info("registry: microVM resumed", "microvm", v.id, "duration", time.Since(start).Round(time.Millisecond))
	}
}

// teardown thaws a suspended sandbox, calls the terminate hook (unless
// rayd is gone), destroys the sandbox and marks v TERMINATED. It does not
// depend on the registry's context: a teardown that has begun completes
// even during Close.
func (r *Registry) teardown(v *vm, inst launcher.Instance) {
	r.mu.Lock()
	dirty := v.dirty
	r.mu.Unlock()
	if dirty {
		// Frozen tasks answer no hook (and, on cgroup v1, cannot die).
		ctx, cancel := context.WithTimeout(context.Background(), FreezerTimeout)
		if err := inst.Thaw(ctx); err != nil {
			r.log.Debug("registry: thaw before teardown failed (the launcher kills frozen tasks anyway)", "microvm", v.id, "err", err)
		}
		cancel()
	}
	select {
	case <-inst.Done():
	default:
		ctx, cancel := context.WithTimeout(context.Background(), r.termTO)
		if status, err := r.postHook(ctx, inst.HooksAddr(), "terminate", nil); err != nil || status != http.StatusOK {
			r.log.Debug("registry: terminate hook failed (ignored)", "microvm", v.id, "status", status, "err", err)
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.teardownTO)
	if err := inst.Terminate(ctx); err != nil {
		r.log.Warn("registry: sandbox teardown failed; the next start sweeps what is left", "microvm", v.id, "err", err)
	}
	cancel()
	r.finish(v)
}

// finish marks v TERMINATED now.
func (r *Registry) finish(v *vm) {
	r.mu.Lock()
	if v.pub.State == microvmsapi.StateTerminated {
		r.mu.Unlock()
		return
	}
	if v.pub.State != microvmsapi.StateTerminating { // not through requestTerminateLocked
		close(v.stop)
	}
	t := now()
	v.pub.TerminatedAt = &t
	r.setStateLocked(v, microvmsapi.StateTerminated)
	if v.timer != nil {
		v.timer.Stop()
	}
	close(v.done)
	reason := v.pub.StateReason
	// Its capacity (and maybe the address or uid block a failed refill
	// lacked) is free again.
	r.pool.retryAt = time.Time{}
	r.mu.Unlock()
	r.log.Info("registry: microVM terminated", "microvm", v.id, "reason", reason)
	r.persist(v)
	r.kickPool()
}

// runEnvelope is the body of the run hook.
type runEnvelope struct {
	MicrovmID      string `json:"microvmId"`
	RunHookPayload string `json:"runHookPayload"`
}

// hookStatusError is a hook's answer other than 200.
type hookStatusError struct{ status int }

func (e *hookStatusError) Error() string { return fmt.Sprintf("hook answered HTTP %d", e.status) }

// errExited is postRun's error when rayd exits before answering.
var errExited = errors.New("rayd exited")

// postRun POSTs the run hook within the run-hook timeout. Connection
// failures are retried (rayd may not listen yet, and a repeated /run only
// answers "already_ran"); any HTTP answer is final.
func (r *Registry) postRun(ctx context.Context, inst launcher.Instance, id, payload string) error {
	body, err := json.Marshal(runEnvelope{MicrovmID: id, RunHookPayload: payload})
	if err != nil {
		return err
	}
	return r.postHookRetry(ctx, inst, "run", body, r.runTO, false)
}

// postHookRetry POSTs hook within timeout d. Connection failures are
// retried (rayd may not listen yet, or again), and so is a 503 when
// retry503 says (rayd warming up, as /ready answers); any other HTTP
// answer is final: 200 is success, anything else a *hookStatusError.
func (r *Registry) postHookRetry(ctx context.Context, inst launcher.Instance, hook string, body []byte, d time.Duration, retry503 bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	backoff := 5 * time.Millisecond
	for {
		status, err := r.postHook(ctx, inst.HooksAddr(), hook, body)
		switch {
		case err == nil && status == http.StatusOK:
			return nil
		case err == nil && (status != http.StatusServiceUnavailable || !retry503):
			return &hookStatusError{status: status}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-inst.Done():
			t.Stop()
			return errExited
		case <-t.C:
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// postHook POSTs one lifecycle hook and returns the HTTP status.
func (r *Registry) postHook(ctx context.Context, addr, hook string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+HookPathPrefix+hook, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
