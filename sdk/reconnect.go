package rayito

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
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

// followTimings are the reconnection waits of t.
func (t *timings) follow() follow.Timings {
	return follow.Timings{StatePoll: t.statePoll, StatePollMax: t.statePollMax, HealthPoll: t.healthPoll,
		HealthPollMax: t.healthPollMax, Budget: t.reconnect, SuspendGrace: t.suspendGrace}
}

// newReconnect is a reconnection of the sandbox (sdk/internal/follow's
// algorithm, this package's control plane and Health).
func (s *Sandbox) newReconnect() *follow.Reconnect {
	return follow.NewReconnect(s.cfg.timings.follow(), sandboxProbe{s})
}

// errReconnectBudget: the sandbox runs but did not answer within the
// reconnect budget.
var errReconnectBudget = follow.ErrBudget

// errSuspendingStream stands for a stream rayd ended with the status (or
// in-stream code) "suspending" rather than the UNAVAILABLE error.
var errSuspendingStream = follow.ErrSuspending

// sandboxProbe is how a reconnection sees the sandbox: GetMicrovm (which
// never wakes a paused sandbox; TERMINATING or TERMINATED, or gone, is a
// *SandboxEndedError) and Health.
type sandboxProbe struct{ s *Sandbox }

func (p sandboxProbe) State(ctx context.Context) (follow.State, error) {
	s := p.s
	vm, err := s.mv.GetMicrovm(ctx, s.id)
	switch {
	case err == nil && ended(vm.State):
		return 0, endedErr(s.cfg, vm)
	case err != nil && errors.Is(controlPlaneErr(s.cfg, s.id, err), ErrNotFound):
		return 0, s.gone()
	case err != nil:
		return follow.Unreadable, nil
	case vm.State == microvmsapi.StateRunning:
		return follow.Running, nil
	}
	return follow.NotRunning, nil
}

func (p sandboxProbe) Answers(ctx context.Context) bool { return p.s.answers(ctx) }

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
