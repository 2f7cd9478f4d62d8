package rayito

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/internal/backoff"
	"github.com/rayito-dev/rayito/sdk/internal/follow"
)

// timings are the SDK's waits, one set per config so that tests can
// shrink them.
type timings struct {
	// statePoll doubles up to statePollMax: GetMicrovm while a sandbox is
	// paused, pausing or starting, when nothing else is asked.
	statePoll, statePollMax time.Duration
	// healthPoll doubles up to healthPollMax: Health (after a GetMicrovm)
	// while a running sandbox does not answer.
	healthPoll, healthPollMax time.Duration
	// reconnect is the budget of one reconnection: the time a running
	// sandbox may take to answer again. Time paused is not counted.
	reconnect time.Duration
	// suspendGrace: after a stream cut by a suspend, how long GetMicrovm
	// may go on saying RUNNING (its state lags) before the SDK believes
	// the suspend did not happen (rayd reopens after 20 s without one).
	suspendGrace time.Duration
	// transition doubles up to transitionMax: GetMicrovm while Pause and
	// Resume wait for their state.
	transition, transitionMax time.Duration
}

func defaultTimings(b Backend) timings {
	t := timings{
		statePoll: time.Second, statePollMax: 5 * time.Second,
		healthPoll: 500 * time.Millisecond, healthPollMax: 4 * time.Second,
		reconnect:    DefaultReconnectTimeout,
		suspendGrace: 25 * time.Second,
		transition:   250 * time.Millisecond, transitionMax: 2 * time.Second,
	}
	if b == BackendLocal {
		// The local platform changes state in milliseconds and reports
		// it at once; asking it costs a loopback round trip and never
		// wakes a sandbox, so a paused stream follows a resume at once.
		t.transition = 10 * time.Millisecond
		t.statePoll, t.statePollMax = 50*time.Millisecond, time.Second
	}
	return t
}

// reconnect is the state of one follower's (or watcher's) reconnection:
// the budget left, the backoff, and whether a suspend cut the stream.
type reconnect struct {
	t      *timings
	left   time.Duration
	health backoff.Backoff // between Health tries
	tries  int
	// suspendAt is set when a suspend cut the stream: until a paused
	// state is seen (sawPaused), RUNNING is not believed for
	// suspendGrace.
	suspendAt time.Time
	sawPaused bool
	// last is the error that cut the last stream.
	last error
}

func newReconnect(t *timings) reconnect {
	return reconnect{t: t, left: t.reconnect, health: backoff.New(t.healthPoll, t.healthPollMax)}
}

// progress resets the budget and the backoff: the stream delivered
// something new.
func (r *reconnect) progress() {
	r.left, r.tries = r.t.reconnect, 0
	r.health.Reset()
}

// cut records the error that ended a stream.
func (r *reconnect) cut(err error) {
	r.last = err
	if isSuspending(err) && r.suspendAt.IsZero() {
		r.suspendAt, r.sawPaused = time.Now(), false
	}
}

// errReconnectBudget: the sandbox runs but did not answer within the
// reconnect budget.
var errReconnectBudget = follow.ErrBudget

// errSuspendingStream stands for a stream rayd ended with the status (or
// in-stream code) "suspending" rather than the UNAVAILABLE error.
var errSuspendingStream = follow.ErrSuspending

// isSuspending reports whether err is rayd's "this stream ends because the
// sandbox is being suspended".
func isSuspending(err error) bool {
	if errors.Is(err, errSuspendingStream) {
		return true
	}
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeUnavailable {
		return false
	}
	for _, d := range ce.Details() {
		if v, derr := d.Value(); derr == nil {
			if info, ok := v.(*raydv1.ErrorInfo); ok && info.GetReason() == raydv1.ErrorReason_ERROR_REASON_SUSPENDING {
				return true
			}
		}
	}
	return false
}

// awaitReachable waits until the sandbox can take a new stream after one
// was cut, asking the control plane first, which never wakes a paused
// sandbox:
//
//   - TERMINATING or TERMINATED (or gone): a *SandboxEndedError;
//   - SUSPENDING, SUSPENDED or PENDING: GetMicrovm again every 1 s,
//     growing to 5 s, and nothing else: the sandbox's endpoint is not
//     touched (a request there could resume it) and the budget is not
//     spent;
//   - RUNNING: Health, backing off from 0.5 s to 4 s (each try after a
//     new GetMicrovm); nil once rayd answers ready for this sandbox.
//
// The time spent on a running (or unreadable) sandbox that does not
// answer comes out of r's budget; errReconnectBudget when it is spent.
func (s *Sandbox) awaitReachable(ctx context.Context, r *reconnect) error {
	t := r.t
	statePoll := backoff.New(t.statePoll, t.statePollMax)
	for {
		start := time.Now()
		if r.tries > 0 {
			if err := backoff.Sleep(ctx, min(r.health.Next(), max(r.left, 0))); err != nil {
				return err
			}
		}
		r.tries++
		vm, err := s.mv.GetMicrovm(ctx, s.id)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		running := err == nil && vm.State == microvmsapi.StateRunning
		switch {
		case err == nil && ended(vm.State):
			return endedErr(s.cfg, vm)
		case err != nil && errors.Is(controlPlaneErr(s.cfg, s.id, err), ErrNotFound):
			return s.gone()
		case err == nil && !running:
			r.sawPaused = true
			fallthrough
		case running && !r.suspendAt.IsZero() && !r.sawPaused && time.Since(r.suspendAt) < t.suspendGrace:
			// Paused, pausing or starting; or a suspend began and the
			// control plane does not show it yet.
			r.tries = 0
			r.health.Reset()
			if err := statePoll.Wait(ctx); err != nil {
				return err
			}
			continue
		}
		statePoll.Reset()
		// The backoff and the control plane's answer are spent on a
		// sandbox that runs (or cannot be read): they count, also when
		// rayd answers now and the next stream is cut again at once.
		r.left -= time.Since(start)
		if r.left <= 0 {
			return errReconnectBudget
		}
		if running {
			asked := time.Now()
			if s.answers(ctx) {
				r.suspendAt, r.sawPaused = time.Time{}, false
				return nil
			}
			r.left -= time.Since(asked)
		}
	}
}

// answers reports whether rayd answers Health ready for this sandbox.
func (s *Sandbox) answers(ctx context.Context) bool {
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := s.dp.health.Health(hctx, connect.NewRequest(&raydv1.HealthRequest{}))
	return err == nil && resp.Msg.GetAgentReady() && resp.Msg.GetSandboxId() == s.id
}

// endOf asks the control plane once whether the sandbox ended: its
// *SandboxEndedError, or nil.
func (s *Sandbox) endOf(ctx context.Context) error {
	vm, err := s.mv.GetMicrovm(ctx, s.id)
	switch {
	case err == nil && ended(vm.State):
		return endedErr(s.cfg, vm)
	case err != nil && errors.Is(controlPlaneErr(s.cfg, s.id, err), ErrNotFound):
		return s.gone()
	}
	return nil
}

// gone is the end of a sandbox its own control plane no longer knows (it
// ended and the platform dropped its record): this Sandbox was made from
// that platform's answer, so the sandbox is not on another one, and its
// token leaves the store.
func (s *Sandbox) gone() error {
	s.cfg.forget(s.id)
	return &SandboxEndedError{ID: s.id, Reason: EndUnknown}
}
