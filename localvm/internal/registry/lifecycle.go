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
// (unless inst is an adopted one), calls the run hook, waits for a reason
// to stop, and tears it down. It returns early, leaving the sandbox
// running, when the registry closes.
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

// boot launches v's sandbox and calls its run hook. It returns nil when
// nothing was launched (v is then TERMINATING); otherwise the instance,
// with v RUNNING or, when the run hook failed, TERMINATING.
func (r *Registry) boot(v *vm, ctx context.Context, payload string) launcher.Instance {
	defer v.markBooted()
	defer func() {
		r.mu.Lock()
		v.cancelStart()
		r.mu.Unlock()
	}()
	spec := launcher.Spec{
		ID:       v.id,
		Internet: hasConnector(v.pub.EgressNetworkConnectors, microvmsapi.ConnectorInternet),
		LogPath:  filepath.Join(v.dir, LogFileName),
		Dir:      v.dir,
	}
	inst, err := r.launcher.Launch(ctx, spec)
	if err != nil {
		reason := ReasonLaunchFailed + ": " + oneLine(err.Error(), 240)
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
	rec := inst.Record()
	r.mu.Lock()
	v.inst, v.rec = inst, &rec
	v.gen++
	r.mu.Unlock()
	r.persist(v)

	if err := r.postRun(ctx, inst, v.id, payload); err != nil {
		reason := runFailureReason(err)
		if r.base.Err() != nil {
			reason = ReasonPlatformStopped
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
		v.pub.State = microvmsapi.StateRunning
		v.gen++
	}
	r.mu.Unlock()
	if changed {
		r.log.Info("registry: microVM running", "microvm", v.id)
		r.persist(v)
	}
	return inst
}

// watch waits until v must stop, then tears it down; or returns at once,
// leaving the sandbox alone, when the registry closes.
func (r *Registry) watch(v *vm, inst launcher.Instance) {
	select {
	case <-v.stop:
		r.teardown(v, inst)
		return
	default:
	}
	select {
	case <-v.stop:
		r.teardown(v, inst)
	case <-inst.Done():
		reason := exitReason(inst)
		r.mu.Lock()
		changed := r.requestTerminateLocked(v, reason)
		r.mu.Unlock()
		if changed {
			r.log.Info("registry: rayd exited", "microvm", v.id, "reason", reason)
			r.persist(v)
		}
		r.teardown(v, inst)
	case <-r.base.Done():
		select {
		case <-v.stop: // a termination raced with Close: finish it
			r.teardown(v, inst)
		default:
		}
	}
}

// teardown calls the terminate hook (unless rayd is gone), destroys the
// sandbox and marks v TERMINATED. It does not depend on the registry's
// context: a teardown that has begun completes even during Close.
func (r *Registry) teardown(v *vm, inst launcher.Instance) {
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
	v.pub.State = microvmsapi.StateTerminated
	v.pub.TerminatedAt = &t
	v.gen++
	if v.timer != nil {
		v.timer.Stop()
	}
	close(v.done)
	reason := v.pub.StateReason
	r.mu.Unlock()
	r.log.Info("registry: microVM terminated", "microvm", v.id, "reason", reason)
	r.persist(v)
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

// runFailureReason is the stateReason for a failed run hook. It never
// contains the payload.
func runFailureReason(err error) string {
	var se *hookStatusError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("Run hook failed with HTTP status %d.", se.status)
	case errors.Is(err, errExited):
		return "Run hook failed: the container stopped."
	case errors.Is(err, context.DeadlineExceeded):
		return ReasonRunHookTimeout
	default:
		return "Run hook failed."
	}
}

// postRun POSTs the run hook within the run-hook timeout. Connection
// failures are retried (rayd may not listen yet, and a repeated /run only
// answers "already_ran"); any HTTP answer is final.
func (r *Registry) postRun(ctx context.Context, inst launcher.Instance, id, payload string) error {
	ctx, cancel := context.WithTimeout(ctx, r.runTO)
	defer cancel()
	body, err := json.Marshal(runEnvelope{MicrovmID: id, RunHookPayload: payload})
	if err != nil {
		return err
	}
	backoff := 10 * time.Millisecond
	for {
		status, err := r.postHook(ctx, inst.HooksAddr(), "run", body)
		if err == nil {
			if status == http.StatusOK {
				return nil
			}
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
