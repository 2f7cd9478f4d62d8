// Package deadline keeps the sandbox's managed lifetime: the timeout that
// the run payload's lifecycle block sets at /run, moved later by
// LifecycleService.SetTimeout, never past the cap, and what happens when it
// runs out.
//
// # Running time
//
// Every duration here is running time: the time between /suspend and
// /resume does not count. A snapshot's wall and monotonic clocks both jump
// by the paused time when the sandbox resumes, so a plain timer would fire
// at once; the [Manager] instead stops counting at [Manager.Pause] and
// starts again at [Manager.Resume]. The cap is cap_s of running time from
// /run.
//
// # Phases
//
//   - [PhaseUnmanaged]: the run payload had no lifecycle block (or /run has
//     not happened). SetTimeout answers [ErrUnmanaged].
//   - [PhaseActive]: the deadline is ahead.
//   - [PhaseExpired]: the deadline passed; [Options].OnExpire was called with
//     the payload's on_timeout action. With [ActionKill] rayd ends every
//     process and exits (SetTimeout answers [ErrKilled]); with [ActionPause]
//     rayd asks the platform to suspend the sandbox and SetTimeout may still
//     revive it.
//   - [PhaseResumeGrace]: a sandbox paused by its timeout was resumed; it
//     gets [Options].Grace of running time (30 s, never past the cap) for a
//     SetTimeout to extend it, after which the action happens again. With
//     the payload's auto_resume it is instead [PhaseActive] again, with
//     its timeout once more (never past the cap).
//
// In the last two phases rayd answers only Health and SetTimeout
// ([Manager.Holds]).
//
// The clock is injectable ([Clock]) so that the logic is tested without
// sleeping.
package deadline

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/proto/runpayload"
)

// DefaultGrace is the running time a sandbox paused by its timeout gets
// after a resume.
const DefaultGrace = 30 * time.Second

// Action is what happens at the deadline.
type Action int

// Actions.
const (
	ActionKill  Action = iota + 1 // end every process, rayd exits 124
	ActionPause                   // ask the platform to suspend the sandbox
)

func (a Action) String() string {
	switch a {
	case ActionKill:
		return runpayload.OnTimeoutKill
	case ActionPause:
		return runpayload.OnTimeoutPause
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Mode says how SetTimeout treats the current deadline.
type Mode int

// Modes.
const (
	// ModeExact sets the remaining running time, even when it is shorter.
	ModeExact Mode = iota + 1
	// ModeAtLeast only extends: the remaining time becomes the larger of
	// the current one and the requested one.
	ModeAtLeast
)

// Phase is where the sandbox is in its managed life.
type Phase int

// Phases; see the package documentation.
const (
	PhaseUnmanaged Phase = iota + 1
	PhaseActive
	PhaseResumeGrace
	PhaseExpired
)

func (p Phase) String() string {
	switch p {
	case PhaseUnmanaged:
		return "unmanaged"
	case PhaseActive:
		return "active"
	case PhaseResumeGrace:
		return "resume_grace"
	case PhaseExpired:
		return "expired"
	}
	return fmt.Sprintf("Phase(%d)", int(p))
}

// Policy is the run payload's lifecycle block.
type Policy struct {
	Timeout time.Duration // initial running time until the deadline
	Cap     time.Duration // no deadline beyond this much running time from /run
	Action  Action
	// AutoResume: a sandbox paused by its timeout gets its Timeout again
	// (never past the cap) when it is resumed, instead of the resume
	// grace; a request that woke it through the platform's auto-resume
	// then finds it active.
	AutoResume bool
}

// PolicyFrom converts a decoded (and so validated) lifecycle block; it
// reports false for nil.
func PolicyFrom(l *runpayload.Lifecycle) (Policy, bool) {
	if l == nil {
		return Policy{}, false
	}
	p := Policy{
		Timeout:    time.Duration(l.TimeoutS) * time.Second,
		Cap:        time.Duration(l.CapS) * time.Second,
		Action:     ActionKill,
		AutoResume: l.AutoResume,
	}
	if l.OnTimeout == runpayload.OnTimeoutPause {
		p.Action = ActionPause
	}
	return p, true
}

// State is a snapshot of the managed lifetime. Deadline and Cap are the
// wall-clock instants they fall on if the sandbox keeps running; all
// fields but Phase are zero when unmanaged.
type State struct {
	Phase      Phase
	Deadline   time.Time
	Cap        time.Time
	Timeout    time.Duration // the timeout the deadline was last set from
	Action     Action
	AutoResume bool
	Extensions uint32 // SetTimeout calls that moved the deadline later
}

// Errors of SetTimeout. rpcerr maps them.
var (
	// ErrInvalid: timeout not positive or mode not EXACT or AT_LEAST.
	ErrInvalid = errors.New("deadline: invalid timeout or mode")
	// ErrUnmanaged: no lifecycle block in the run payload.
	ErrUnmanaged = errors.New("deadline: the sandbox's lifetime is not managed")
	// ErrExpired: the timeout expired; only Health and SetTimeout answer.
	ErrExpired = errors.New("deadline: the sandbox's timeout expired")
	// ErrKilled: the timeout expired with on_timeout kill, so nothing can
	// extend it any more. It matches ErrExpired too.
	ErrKilled error = killedError{}
	// ErrPastCap: the requested deadline lies past the cap; the error is
	// a *CapError naming the cap.
	ErrPastCap = errors.New("deadline: past the cap")
)

type killedError struct{}

func (killedError) Error() string         { return "deadline: the sandbox's timeout expired (on_timeout kill)" }
func (killedError) Is(target error) bool  { return target == ErrExpired }
func (killedError) PublicMessage() string { return msgKilled }

const msgKilled = "the sandbox's timeout expired with on_timeout kill: it is shutting down"

// CapError is a SetTimeout past the cap. It matches ErrPastCap.
type CapError struct {
	Cap time.Time // when the cap falls if the sandbox keeps running
}

func (e *CapError) Error() string        { return "deadline: past the cap" }
func (e *CapError) Is(target error) bool { return target == ErrPastCap }

// PublicMessage is the client's message: it carries cap_unix_ms=<n>.
func (e *CapError) PublicMessage() string {
	return fmt.Sprintf("timeout_ms reaches past the sandbox's cap: cap_unix_ms=%d", e.Cap.UnixMilli())
}

// Clock is the time source of a Manager.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d, unless stopped.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface{ Stop() bool }

type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Options configure a Manager. All fields are optional.
type Options struct {
	Clock Clock         // nil: the system clock
	Grace time.Duration // resume grace; 0: DefaultGrace
	// OnExpire is called each time the deadline passes (the phase has
	// just become PhaseExpired), from a timer goroutine and without any
	// lock held.
	OnExpire func(Action)
	Logger   *slog.Logger
}

// Manager keeps the managed lifetime. It is safe for concurrent use.
type Manager struct {
	clock    Clock
	grace    time.Duration
	onExpire func(Action)
	log      *slog.Logger

	mu         sync.Mutex
	managed    bool
	policy     Policy
	phase      Phase
	ran        time.Duration // running time before the current segment
	since      time.Time     // start of the current running segment
	paused     bool
	deadline   time.Duration // running time at which the action is due
	timeout    time.Duration
	extensions uint32
	timer      Timer
	gen        uint64 // invalidates a timer that fires after being replaced
}

// New returns an unmanaged Manager.
func New(opts Options) *Manager {
	m := &Manager{clock: opts.Clock, grace: opts.Grace, onExpire: opts.OnExpire, log: opts.Logger, phase: PhaseUnmanaged}
	if m.clock == nil {
		m.clock = realClock{}
	}
	if m.grace <= 0 {
		m.grace = DefaultGrace
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.since = m.clock.Now()
	return m
}

// Start manages the lifetime from now on with p (at /run). Only the first
// call counts.
func (m *Manager) Start(p Policy) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.managed {
		return
	}
	m.managed = true
	m.policy = p
	m.phase = PhaseActive
	now := m.clock.Now()
	m.ran, m.since = 0, now
	m.deadline, m.timeout = p.Timeout, p.Timeout
	m.armLocked(now)
	m.log.Info("lifecycle: managed", "timeout_s", int64(p.Timeout/time.Second), "cap_s", int64(p.Cap/time.Second), "on_timeout", p.Action.String())
}

// Pause stops counting running time (at /suspend). Repeated calls are
// no-ops.
func (m *Manager) Pause() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.paused {
		return
	}
	m.ran = m.runningLocked(m.clock.Now())
	m.paused = true
	m.stopLocked()
}

// Resume counts running time again (at /resume, or when the suspend gate
// reopens without a snapshot). A sandbox expired with on_timeout pause, or
// already in its grace, enters a fresh resume grace.
func (m *Manager) Resume() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.paused {
		return
	}
	now := m.clock.Now()
	m.paused = false
	m.since = now
	if !m.managed {
		return
	}
	if m.policy.Action == ActionPause && (m.phase == PhaseExpired || m.phase == PhaseResumeGrace) {
		if m.policy.AutoResume && m.ran < m.policy.Cap {
			m.phase = PhaseActive
			m.deadline = min(m.ran+m.policy.Timeout, m.policy.Cap)
			m.timeout = m.deadline - m.ran
			m.extensions++
			m.log.Info("lifecycle: resumed after the timeout: auto-resume gives a new deadline", "timeout_ms", m.timeout.Milliseconds())
		} else {
			m.phase = PhaseResumeGrace
			m.deadline = min(m.ran+m.grace, m.policy.Cap)
			m.log.Info("lifecycle: resumed after the timeout: grace", "grace_ms", (m.deadline - m.ran).Milliseconds())
		}
	}
	m.armLocked(now)
}

// SetTimeout moves the deadline to d of running time from now (ModeExact)
// or to at least that (ModeAtLeast), never past the cap, and returns the new
// state. A valid call in PhaseExpired (on_timeout pause) or
// PhaseResumeGrace makes the sandbox active again.
//
// Errors: ErrInvalid, ErrUnmanaged, ErrKilled, a *CapError (ErrPastCap).
func (m *Manager) SetTimeout(d time.Duration, mode Mode) (State, error) {
	if d <= 0 || (mode != ModeExact && mode != ModeAtLeast) {
		return State{}, ErrInvalid
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.managed {
		return State{}, ErrUnmanaged
	}
	if m.phase == PhaseExpired && m.policy.Action == ActionKill {
		return State{}, ErrKilled
	}
	now := m.clock.Now()
	r := m.runningLocked(now)
	want := d
	if remaining := m.deadline - r; mode == ModeAtLeast && remaining > want {
		want = remaining
	}
	next := r + want
	if next > m.policy.Cap {
		return State{}, &CapError{Cap: now.Add(m.policy.Cap - r)}
	}
	if next > m.deadline {
		m.extensions++
	}
	if next != m.deadline || mode == ModeExact {
		m.timeout = want
	}
	if m.phase != PhaseActive {
		m.log.Info("lifecycle: timeout extended after expiry: active again", "phase_was", m.phase.String())
	}
	m.deadline = next
	m.phase = PhaseActive
	m.armLocked(now)
	return m.stateLocked(now), nil
}

// State returns the current state.
func (m *Manager) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stateLocked(m.clock.Now())
}

// Phase returns the current phase.
func (m *Manager) Phase() Phase {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.phase
}

// Holds reports whether the timeout holds every RPC but Health and
// SetTimeout: in PhaseExpired and PhaseResumeGrace.
func (m *Manager) Holds() bool {
	p := m.Phase()
	return p == PhaseExpired || p == PhaseResumeGrace
}

func (m *Manager) stateLocked(now time.Time) State {
	if !m.managed {
		return State{Phase: PhaseUnmanaged}
	}
	r := m.runningLocked(now)
	return State{
		Phase:      m.phase,
		Deadline:   now.Add(m.deadline - r),
		Cap:        now.Add(m.policy.Cap - r),
		Timeout:    m.timeout,
		Action:     m.policy.Action,
		AutoResume: m.policy.AutoResume,
		Extensions: m.extensions,
	}
}

// runningLocked is the running time at now.
func (m *Manager) runningLocked(now time.Time) time.Duration {
	if m.paused {
		return m.ran
	}
	return m.ran + now.Sub(m.since)
}

func (m *Manager) stopLocked() {
	m.gen++
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
}

// armLocked (re)starts the timer for the deadline; none while paused,
// unmanaged or expired.
func (m *Manager) armLocked(now time.Time) {
	m.stopLocked()
	if m.paused || !m.managed || m.phase == PhaseExpired {
		return
	}
	gen := m.gen
	wait := max(m.deadline-m.runningLocked(now), 0)
	m.timer = m.clock.AfterFunc(wait, func() { m.fire(gen) })
}

// fire runs when a timer armed under gen expires.
func (m *Manager) fire(gen uint64) {
	m.mu.Lock()
	if gen != m.gen || m.paused || m.phase == PhaseExpired {
		m.mu.Unlock()
		return
	}
	now := m.clock.Now()
	if m.runningLocked(now) < m.deadline {
		m.armLocked(now) // early (a clock step): wait for the rest
		m.mu.Unlock()
		return
	}
	m.timer = nil
	was := m.phase
	m.phase = PhaseExpired
	action := m.policy.Action
	m.mu.Unlock()
	m.log.Warn("lifecycle: the sandbox's timeout expired", "on_timeout", action.String(), "phase_was", was.String())
	if m.onExpire != nil {
		m.onExpire(action)
	}
}
