package follow

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/sdk/internal/backoff"
)

// Timings are a reconnection's waits.
type Timings struct {
	// StatePoll doubles up to StatePollMax: the control plane asked while
	// a sandbox is paused, pausing or starting.
	StatePoll, StatePollMax time.Duration
	// HealthPoll doubles up to HealthPollMax: Health (after a state
	// read) while a running sandbox does not answer.
	HealthPoll, HealthPollMax time.Duration
	// Budget is the time a running sandbox may take to answer again;
	// time paused is not counted.
	Budget time.Duration
	// SuspendGrace: after a stream cut by a suspend, how long the control
	// plane may go on saying RUNNING (its state lags) before the suspend
	// is believed not to have happened.
	SuspendGrace time.Duration
}

// State is what the control plane says of a sandbox.
type State int

// The states a reconnection tells apart.
const (
	// Unreadable: the control plane did not answer; the time counts.
	Unreadable State = iota
	// Running: rayd is asked (Health).
	Running
	// NotRunning: paused, pausing or starting; only waited for.
	NotRunning
)

// Probe is how a reconnection sees its sandbox.
type Probe interface {
	// State asks the control plane, which never wakes a paused sandbox;
	// an error (the sandbox ended or is gone) ends the wait.
	State(ctx context.Context) (State, error)
	// Answers reports whether rayd answers Health ready for the sandbox.
	Answers(ctx context.Context) bool
}

// Reconnect is the state of one follower's (or watcher's) reconnection:
// the budget left, the backoff, and whether a suspend cut the stream. It
// is a Reconnector.
type Reconnect struct {
	t      Timings
	probe  Probe
	left   time.Duration
	health backoff.Backoff // between Health tries
	tries  int
	// suspendAt is set when a suspend cut the stream: until a paused
	// state is seen (sawPaused), RUNNING is not believed for
	// SuspendGrace.
	suspendAt time.Time
	sawPaused bool
	// last is the error that cut the last stream.
	last error
}

// NewReconnect returns a reconnection of probe's sandbox with t's waits.
func NewReconnect(t Timings, probe Probe) *Reconnect {
	return &Reconnect{t: t, probe: probe, left: t.Budget, health: backoff.New(t.HealthPoll, t.HealthPollMax)}
}

// Progress resets the budget and the backoff: the stream delivered
// something new.
func (r *Reconnect) Progress() {
	r.left, r.tries = r.t.Budget, 0
	r.health.Reset()
}

// Cut records the error that ended a stream.
func (r *Reconnect) Cut(err error) {
	r.last = err
	if IsSuspending(err) && r.suspendAt.IsZero() {
		r.suspendAt, r.sawPaused = time.Now(), false
	}
}

// Last is the error that cut the last stream.
func (r *Reconnect) Last() error { return r.last }

// Await waits until the sandbox can take a new stream after one was cut,
// asking the control plane first, which never wakes a paused sandbox:
//
//   - ended or gone: the probe's error;
//   - not running (paused, pausing, starting): asked again every
//     StatePoll, growing to StatePollMax, and nothing else: the sandbox's
//     endpoint is not touched (a request there could resume it) and the
//     budget is not spent;
//   - running: Health, backing off from HealthPoll to HealthPollMax (each
//     try after a new state read); nil once rayd answers.
//
// The time spent on a running (or unreadable) sandbox that does not
// answer comes out of the budget; ErrBudget when it is spent.
func (r *Reconnect) Await(ctx context.Context) error {
	statePoll := backoff.New(r.t.StatePoll, r.t.StatePollMax)
	for {
		start := time.Now()
		if r.tries > 0 {
			if err := backoff.Sleep(ctx, min(r.health.Next(), max(r.left, 0))); err != nil {
				return err
			}
		}
		r.tries++
		st, err := r.probe.State(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return err
		}
		if st == NotRunning {
			r.sawPaused = true
		}
		if st == NotRunning || st == Running && !r.suspendAt.IsZero() && !r.sawPaused && time.Since(r.suspendAt) < r.t.SuspendGrace {
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
			return ErrBudget
		}
		if st == Running {
			asked := time.Now()
			if r.probe.Answers(ctx) {
				r.suspendAt, r.sawPaused = time.Time{}, false
				return nil
			}
			r.left -= time.Since(asked)
		}
	}
}

// IsSuspending reports whether err is rayd's "this stream ends because
// the sandbox is being suspended".
func IsSuspending(err error) bool {
	if errors.Is(err, ErrSuspending) {
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
