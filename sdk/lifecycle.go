package rayito

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/sdk/internal/backoff"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// TimeoutAction is what happens at a sandbox's deadline (WithOnTimeout).
type TimeoutAction string

// The actions.
const (
	// TimeoutKill ends the sandbox: rayd exits with status 124 and the
	// platform terminates it some seconds later (EndTimeout).
	TimeoutKill TimeoutAction = "kill"
	// TimeoutPause pauses it: rayd answers only Health and SetTimeout from
	// then on (ErrSandboxTimeout) and asks to be paused, which the local
	// platform does at once; on AWS the idle policy (WithIdlePolicy) or a
	// Pause does it. Resume it (or, with auto-resume, send it a request)
	// and give it a new deadline with SetTimeout (WithAutoResume does that
	// on resume).
	TimeoutPause TimeoutAction = "pause"
)

// LifecyclePhase is where a sandbox is in its managed lifetime
// (Lifecycle.Phase). The set is closed; later versions may add phases.
type LifecyclePhase string

// The phases.
const (
	// PhaseUnmanaged: created without a deadline (no WithTimeout,
	// WithOnTimeout, WithMaxLifetime or WithAutoResume); SetTimeout
	// answers ErrLifecycleUnmanaged.
	PhaseUnmanaged LifecyclePhase = "unmanaged"
	// PhaseActive: the deadline is ahead.
	PhaseActive LifecyclePhase = "active"
	// PhaseResumeGrace: the sandbox was resumed past its deadline and has
	// 30 s to get a new one (SetTimeout) before it expires again.
	PhaseResumeGrace LifecyclePhase = "resume_grace"
	// PhaseExpired: the deadline passed; only Health and SetTimeout
	// answer.
	PhaseExpired LifecyclePhase = "expired"
)

// Lifecycle is a sandbox's managed lifetime, as its daemon reports it.
type Lifecycle struct {
	Phase LifecyclePhase
	// Deadline is when OnTimeout happens; zero when unmanaged.
	Deadline time.Time
	// Cap is the latest deadline SetTimeout may set (WithMaxLifetime).
	Cap time.Time
	// Timeout is the last timeout asked for (WithTimeout, SetTimeout).
	Timeout    time.Duration
	OnTimeout  TimeoutAction
	AutoResume bool
	// Extensions counts the deadline's moves (SetTimeout, auto-resumes).
	Extensions int
}

var phases = map[raydv1.LifecyclePhase]LifecyclePhase{
	raydv1.LifecyclePhase_LIFECYCLE_PHASE_UNMANAGED:    PhaseUnmanaged,
	raydv1.LifecyclePhase_LIFECYCLE_PHASE_ACTIVE:       PhaseActive,
	raydv1.LifecyclePhase_LIFECYCLE_PHASE_RESUME_GRACE: PhaseResumeGrace,
	raydv1.LifecyclePhase_LIFECYCLE_PHASE_EXPIRED:      PhaseExpired,
}

// lifecycleOf converts rayd's state (nil for none).
func lifecycleOf(st *raydv1.LifecycleState) *Lifecycle {
	if st == nil {
		return nil
	}
	l := &Lifecycle{
		Phase:      phases[st.GetPhase()],
		Timeout:    time.Duration(st.GetTimeoutMs()) * time.Millisecond,
		AutoResume: st.GetAutoResume(),
		Extensions: int(st.GetExtensions()),
	}
	if l.Phase == "" {
		l.Phase = PhaseUnmanaged
	}
	if ms := st.GetDeadlineUnixMs(); ms > 0 {
		l.Deadline = time.UnixMilli(ms)
	}
	if ms := st.GetCapUnixMs(); ms > 0 {
		l.Cap = time.UnixMilli(ms)
	}
	switch st.GetOnTimeout() {
	case raydv1.TimeoutAction_TIMEOUT_ACTION_KILL:
		l.OnTimeout = TimeoutKill
	case raydv1.TimeoutAction_TIMEOUT_ACTION_PAUSE:
		l.OnTimeout = TimeoutPause
	}
	return l
}

// WithOnTimeout gives the new sandbox a deadline, WithTimeout from its
// start (default 5 minutes), that rayd enforces with action: TimeoutKill
// ends the sandbox then, TimeoutPause keeps it for a pause (see
// TimeoutPause). SetTimeout moves the deadline, up to the sandbox's
// maximum lifetime (WithMaxLifetime). WithTimeout alone gives a deadline
// with TimeoutKill; without any of WithTimeout, WithOnTimeout,
// WithMaxLifetime and WithAutoResume the sandbox has no deadline, only the
// platform's maximum duration (DefaultTimeout).
func WithOnTimeout(action TimeoutAction) Option {
	return sandboxOption(func(c *config) { c.onTimeout = action })
}

// WithAutoResume makes a sandbox paused at its deadline (WithOnTimeout
// TimeoutPause, which it needs) get a new deadline when it is resumed:
// its timeout again, never past its maximum lifetime (without it, a
// resumed sandbox answers only Health and SetTimeout for 30 s, then pauses
// again unless SetTimeout moved its deadline). For the platform to resume
// a paused sandbox on a request, see WithIdlePolicy.
func WithAutoResume() Option { return sandboxOption(func(c *config) { c.autoResume = true }) }

// WithMaxLifetime sets the new sandbox's maximum lifetime, running and
// paused time together (3 minutes to 8 hours): the platform ends it then,
// whatever its deadline. Its deadline's cap is a minute shorter, so that
// rayd acts before the platform does: neither WithTimeout nor SetTimeout
// may go past it. It gives the sandbox a deadline like WithOnTimeout
// (TimeoutKill unless WithOnTimeout says otherwise). The default is the
// timeout plus a minute (at least 3 minutes) with TimeoutKill, and 8 hours
// with TimeoutPause.
func WithMaxLifetime(d time.Duration) Option {
	return sandboxOption(func(c *config) { c.maxLifetime = d })
}

// idlePolicy is WithIdlePolicy.
type idlePolicy struct {
	idle, suspendedFor time.Duration
	autoResume         bool
}

// WithIdlePolicy makes the platform pause the new sandbox after idle (at
// least a minute) without traffic through its endpoint (on AWS only bytes
// count, so an open but silent stream does not keep it awake; the local
// platform counts open requests too), end it after suspendedFor paused (0
// or more), and,
// with autoResume, resume it when a request reaches its endpoint (the
// request waits for it). Command, terminal and watch handles never wake a
// sandbox by themselves: they wait for it (package documentation,
// "Reconnecting").
func WithIdlePolicy(idle, suspendedFor time.Duration, autoResume bool) Option {
	return sandboxOption(func(c *config) {
		c.idle = &idlePolicy{idle: idle, suspendedFor: suspendedFor, autoResume: autoResume}
	})
}

// Lifetime bounds (contract §1.6 and §3.1).
const (
	// capMargin: rayd's cap (the payload's cap_s, in running time) is
	// this much short of the platform's maximum duration, so that the
	// deadline's action comes first.
	capMargin         = time.Minute
	minLifetime       = runpayload.MinCapS*time.Second + capMargin // 3 minutes
	maxLifetime       = microvmsapi.MaxDurationSeconds * time.Second
	minIdle           = microvmsapi.MinIdleSeconds * time.Second
	maxSuspendedFor   = maxLifetime
	durationsMessage  = "must be between 1s and 8h"
	lifetimeMessage   = "the sandbox's maximum lifetime must be between 3m and 8h"
	onTimeoutMessage  = "the action at the sandbox's deadline must be TimeoutKill or TimeoutPause"
	autoResumeMessage = "auto-resume needs the sandbox to pause at its deadline (TimeoutPause)"
)

// runPlan is what Create sends for the options' lifetime: the payload's
// lifecycle block (nil for none), the platform's maximum duration and its
// idle policy.
type runPlan struct {
	lifecycle   *runpayload.Lifecycle
	maxDuration int
	idle        *microvmsapi.IdlePolicy
}

// planRun checks the lifetime options, locally, and turns them into a
// runPlan.
func planRun(cfg *config) (runPlan, error) {
	var p runPlan
	if cfg.timeout < time.Second || cfg.timeout > maxLifetime {
		return p, newError(ReasonInvalidArgument, "the sandbox timeout "+durationsMessage)
	}
	if ip := cfg.idle; ip != nil {
		if ip.idle < minIdle || ip.idle > maxLifetime {
			return p, newError(ReasonInvalidArgument, "the sandbox's idle time must be between 1m and 8h")
		}
		if ip.suspendedFor < 0 || ip.suspendedFor > maxSuspendedFor {
			return p, newError(ReasonInvalidArgument, "the time a sandbox may stay paused must be between 0s and 8h")
		}
		p.idle = &microvmsapi.IdlePolicy{
			MaxIdleDurationSeconds:   int(ip.idle / time.Second),
			SuspendedDurationSeconds: int(ip.suspendedFor / time.Second),
			AutoResumeEnabled:        ip.autoResume,
		}
	}
	// A timeout the caller set is a deadline (rayd ends the sandbox then,
	// reason timeout), unless it leaves no room for one under the
	// platform's maximum. The default lifetime is the platform's maximum
	// duration alone (reason max_duration).
	deadline := cfg.timeoutSet && cfg.timeout <= maxLifetime-capMargin
	if cfg.onTimeout == "" && !cfg.autoResume && cfg.maxLifetime == 0 && !deadline {
		p.maxDuration = int(cfg.timeout / time.Second)
		return p, nil
	}
	action := cfg.onTimeout
	if action == "" {
		action = TimeoutKill
	}
	if action != TimeoutKill && action != TimeoutPause {
		return p, newError(ReasonInvalidArgument, onTimeoutMessage)
	}
	if cfg.autoResume && action != TimeoutPause {
		return p, newError(ReasonInvalidArgument, autoResumeMessage)
	}
	life := cfg.maxLifetime
	if life == 0 {
		life = max(cfg.timeout+capMargin, minLifetime)
		if action == TimeoutPause {
			life = maxLifetime
		}
		life = min(life, maxLifetime)
	}
	if life < minLifetime || life > maxLifetime {
		return p, newError(ReasonInvalidArgument, lifetimeMessage)
	}
	if cfg.timeout > life-capMargin {
		return p, newError(ReasonInvalidArgument, "the sandbox timeout must be at least a minute shorter than its maximum lifetime")
	}
	p.lifecycle = &runpayload.Lifecycle{
		TimeoutS:   int(cfg.timeout / time.Second),
		CapS:       int((life - capMargin) / time.Second),
		OnTimeout:  string(action),
		AutoResume: cfg.autoResume,
	}
	p.maxDuration = int(life / time.Second)
	return p, nil
}

// SetTimeoutOption configures Sandbox.SetTimeout.
type SetTimeoutOption interface{ applySetTimeout(*setTimeoutConfig) }

type setTimeoutConfig struct{ atLeast bool }

type setTimeoutOption func(*setTimeoutConfig)

func (f setTimeoutOption) applySetTimeout(c *setTimeoutConfig) { f(c) }

// AtLeast makes SetTimeout keep the current deadline when it is later than
// the new one: the deadline only moves out. Without it the new deadline
// replaces the old one, sooner or later.
func AtLeast() SetTimeoutOption {
	return setTimeoutOption(func(c *setTimeoutConfig) { c.atLeast = true })
}

// capPattern finds the cap in rayd's refusal ("... cap_unix_ms=<n>").
var capPattern = regexp.MustCompile(`cap_unix_ms=(\d+)`)

// SetTimeout moves the sandbox's deadline to d from now (1 s to 8 h) and
// returns its lifetime as rayd then reports it; AtLeast keeps a later
// deadline. A sandbox past a TimeoutPause deadline (PhaseExpired, or
// PhaseResumeGrace once resumed) gets a new one and answers every call
// again. A deadline past the sandbox's cap (WithMaxLifetime) is a
// *CapExceededError (errors.Is ErrInvalidArgument); a sandbox created
// without a deadline (WithOnTimeout) is ErrLifecycleUnmanaged.
//
// Like every call to the sandbox's daemon it reaches a paused sandbox's
// endpoint: the platform resumes it when auto-resume is on (WithIdlePolicy)
// and refuses the call otherwise; Resume it first.
func (s *Sandbox) SetTimeout(ctx context.Context, d time.Duration, opts ...SetTimeoutOption) (*Lifecycle, error) {
	c := &setTimeoutConfig{}
	for _, o := range opts {
		if o != nil {
			o.applySetTimeout(c)
		}
	}
	if d < time.Second || d > maxLifetime {
		return nil, newError(ReasonInvalidArgument, "the sandbox timeout "+durationsMessage)
	}
	mode := raydv1.TimeoutMode_TIMEOUT_MODE_EXACT
	if c.atLeast {
		mode = raydv1.TimeoutMode_TIMEOUT_MODE_AT_LEAST
	}
	resp, err := s.dp.life.SetTimeout(ctx, connect.NewRequest(&raydv1.SetTimeoutRequest{TimeoutMs: uint64(d / time.Millisecond), Mode: mode}))
	if err != nil {
		err = rpcErr("set timeout", err)
		var re *RPCError
		if errors.As(err, &re) && re.Code == CodeInvalidArgument {
			if m := capPattern.FindStringSubmatch(re.Message); m != nil {
				ce := &CapExceededError{Err: err}
				if ms, perr := strconv.ParseInt(m[1], 10, 64); perr == nil && ms > 0 {
					ce.Cap = time.UnixMilli(ms)
				}
				return nil, ce
			}
		}
		return nil, err
	}
	l := lifecycleOf(resp.Msg.GetState())
	if l == nil {
		return nil, newError(ReasonInternal, "set timeout: the sandbox answered without its lifecycle")
	}
	return l, nil
}

// Pause suspends the sandbox and waits, as long as ctx allows, until the
// platform reports it SUSPENDED: its memory, processes and terminals are
// kept, its streams are cut (handles wait and reattach after Resume), and
// it costs no compute while paused. Pausing a paused sandbox does nothing;
// a sandbox that is still starting is paused once it runs; an ended one
// is a *SandboxEndedError. Paused time counts towards its maximum
// lifetime.
func (s *Sandbox) Pause(ctx context.Context) (err error) {
	ctx, sp := s.span(ctx, "Pause")
	defer func() { sp.end(err) }()
	err = pause(ctx, s.cfg, s.mv, s.id)
	// Its connections do not survive the pause.
	s.dp.close()
	return err
}

// Resume resumes a paused sandbox and waits until its daemon answers
// again; resuming a running sandbox only waits for that. Handles cut by
// the pause reattach by themselves, losing no output. The daemon's version
// is checked as Create checks it (a sandbox reached by Connect while
// paused was not checked). An ended sandbox is a *SandboxEndedError; one
// that does not answer within the ready timeout (WithReadyTimeout) is
// ErrNotReady.
func (s *Sandbox) Resume(ctx context.Context) (err error) {
	ctx, sp := s.span(ctx, "Resume")
	defer func() { sp.end(err) }()
	if err := resume(ctx, s.cfg, s.mv, s.id); err != nil {
		return err
	}
	return s.waitReady(ctx)
}

// resumeSlot is Resume for a sandbox known to be paused (a pool's slot).
// The local platform answers ResumeMicrovm once the sandbox runs, so the
// state reads before and after the call are skipped there; any refusal
// (a conflict, a slot that moved) falls back to the full transition.
func (s *Sandbox) resumeSlot(ctx context.Context) (err error) {
	ctx, sp := s.span(ctx, "Resume")
	defer func() { sp.end(err) }()
	if s.cfg.backend != BackendLocal || s.mv.ResumeMicrovm(ctx, s.id) != nil {
		if err := resume(ctx, s.cfg, s.mv, s.id); err != nil {
			return err
		}
	}
	return s.waitReady(ctx)
}

// Pause pauses the sandbox with the given id, as Sandbox.Pause does. It
// needs no access token. An unknown id is "sandbox X not found" (errors.Is
// ErrNotFound).
func Pause(ctx context.Context, id string, opts ...Option) error {
	s, err := byID(ctx, id, opts)
	if err != nil {
		return err
	}
	return s.Pause(ctx)
}

// Resume resumes the sandbox with the given id and waits until its daemon
// answers, as Sandbox.Resume does. It needs no access token (it waits on
// the daemon's anonymous Health).
func Resume(ctx context.Context, id string, opts ...Option) error {
	s, err := byID(ctx, id, opts)
	if err != nil {
		return err
	}
	defer s.dp.close()
	return s.Resume(ctx)
}

// byID is a tokenless Sandbox for id, for calls that need none.
func byID(ctx context.Context, id string, opts []Option) (*Sandbox, error) {
	cfg, mv, vm, err := lookup(ctx, id, opts)
	if err != nil {
		return nil, err
	}
	if ended(vm.State) {
		return nil, endedErr(cfg, vm)
	}
	return newSandbox(cfg, mv, vm, ""), nil
}

// reaskAfter: Pause and Resume ask the platform again when its state did
// not move in this long (both calls are idempotent).
const reaskAfter = 10 * time.Second

// pause asks the platform to suspend id (unless it is already pausing or
// paused: the service's documentation promises a conflict for those) and
// waits for SUSPENDED.
func pause(ctx context.Context, cfg *config, mv *microvms.Client, id string) error {
	return transition(ctx, cfg, mv, id, "pause", microvmsapi.StateSuspended, microvmsapi.StateRunning, mv.SuspendMicrovm)
}

// resume asks the platform to resume id (when it is paused) and waits for
// RUNNING.
func resume(ctx context.Context, cfg *config, mv *microvms.Client, id string) error {
	return transition(ctx, cfg, mv, id, "resume", microvmsapi.StateRunning, microvmsapi.StateSuspended, mv.ResumeMicrovm)
}

// transition reads id's state until it is want, calling ask (verb names
// it) whenever it is from (again after reaskAfter without a change). Other
// states are waited out; an ended sandbox is a *SandboxEndedError.
func transition(ctx context.Context, cfg *config, mv *microvms.Client, id, verb string, want, from microvmsapi.State,
	ask func(context.Context, string) error) error {
	poll := backoff.New(cfg.timings.transition, cfg.timings.transitionMax)
	var asked time.Time
	for {
		vm, err := mv.GetMicrovm(ctx, id)
		if err != nil {
			return controlPlaneErr(cfg, id, err)
		}
		switch {
		case vm.State == want:
			return nil
		case ended(vm.State):
			return endedErr(cfg, vm)
		case vm.State == from && (asked.IsZero() || time.Since(asked) > reaskAfter):
			if err := ask(ctx, id); err != nil {
				var ae *APIError
				switch {
				case errors.As(err, &ae) && ae.Kind == microvms.KindConflict:
					// The state moved under the call: read it again.
				case errors.As(err, &ae) && ae.Kind == microvms.KindInvalidArgument:
					msg := "sandbox " + id + ": the platform cannot " + verb + " it"
					if cfg.backend == BackendLocal {
						// The local platform's refusal without a cgroup
						// freezer.
						msg += " (a local platform without root cannot freeze sandboxes)"
					}
					return newError(ReasonInvalidArgument, msg, err)
				default:
					return controlPlaneErr(cfg, id, err)
				}
			}
			asked = time.Now()
			poll.Reset()
			// The local platform answers once the change is done: read
			// the state again at once.
			continue
		}
		if err := poll.Wait(ctx); err != nil {
			return err
		}
	}
}
