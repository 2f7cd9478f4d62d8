// Package hooks serves the lifecycle hooks that the platform calls on rayd.
//
// The platform drives a sandbox through six HTTP/1.1 hooks, all POST:
//
//	/aws/lambda-microvms/runtime/v1/ready
//	/aws/lambda-microvms/runtime/v1/validate
//	/aws/lambda-microvms/runtime/v1/run
//	/aws/lambda-microvms/runtime/v1/suspend
//	/aws/lambda-microvms/runtime/v1/resume
//	/aws/lambda-microvms/runtime/v1/terminate
//
// Every hook answers a JSON body such as
//
//	{"hook":"suspend","outcome":"changed","phase":"suspending","suspend_generation":1,"resume_generation":0,"streams_closed":3}
//
// where outcome says what the call did (see [Outcome]), phase is rayd's
// lifecycle phase after it (see [Phase]) and the generations count the
// accepted suspends and resumes. streams_closed comes with an accepted
// /suspend, kernel_state_lost with an accepted /resume. The status is 200
// except for "kernel_warming" and "validating" (503: the platform retries),
// and for other methods (405) and paths (404), both with outcome "illegal".
//
// # Phases
//
// booting → ready (the first /ready) → running (the boot /run) ⇄ suspending
// (/suspend) → resumed (/resume; it behaves like running), and from any
// phase → terminating (/terminate). Once terminating, every hook but
// /terminate answers "terminating" and does nothing.
//
// # Who is calling
//
// Code inside the sandbox can reach the hooks port over loopback. When a
// connection is accepted, [Server.Serve] looks up, once, which uid owns the
// client end of the connection (see package peercred) and classifies the
// caller:
//
//   - [CallerPlatform]: the socket belongs to a uid below 1000 or to rayd's
//     own uid (an unprivileged rayd shares it with its platform), or it is not
//     in this network namespace at all and the client address is not one of
//     this namespace's own addresses (the platform calls over a veth or from
//     the host).
//   - [CallerSandbox]: the socket belongs to a uid of 1000 or more.
//   - [CallerUnknown]: the lookup failed, or the client socket was closed or
//     vanished before it could be identified.
//
// What a caller other than the platform may do (security model T2):
//
//   - /run, /terminate: only the platform. From anyone else they answer
//     "illegal" and do nothing, so a sandbox's /run never consumes the boot
//     /run (a template's start command, which runs before the platform
//     calls, cannot install its token).
//   - /ready, /validate: sandbox code gets "illegal"; an unknown caller is
//     answered as the platform would be.
//   - /suspend, /resume: accepted from anyone and acted upon (a residual risk
//     the security model accepts: a /suspend must never fail the platform,
//     whose caller class a failed lookup may hide). Sandbox code can at most
//     cut the streams and pause the deadline until it, the platform or the
//     watchdog (see below) resumes.
//
// Every call from a caller other than the platform counts as an anomaly.
//
// Over a Unix socket (rayd's --hooks-fd, the local platform's rootless
// mode), the socket's path lies outside the sandbox's filesystem and only
// the platform can connect to it. As a second line, its client is asked for
// its SO_PEERCRED pid: a client outside rayd's pid namespace (pid 0 as rayd
// sees it, which sandbox code can never be) is [CallerPlatform]; any client
// rayd can see, whatever its uid, is [CallerSandbox]. With
// [Options.PlatformOverUnix] every TCP caller is [CallerSandbox]: in a
// rootless sandbox the platform, rayd and the sandbox's code share one uid,
// so the owner of a loopback socket says nothing.
//
// Unknown callers fail closed because sandbox code can make itself unknown
// on purpose: it can write a whole request and close or reset its socket
// before rayd accepts the connection, leaving an ownerless row or none. For
// the same reason a missing row only means "the platform" when the client
// address does not belong to this namespace (loopback or an interface
// address). Any uid below 1000 inside the sandbox counts as the platform.
//
// # What the hooks do
//
// /ready answers 503 "kernel_warming" while [Options].Ready says rayd is not
// ready, then "changed" (phase ready) the first time and "unchanged" later.
//
// /validate runs [Lifecycle.Validate], a cheap self-check, and answers
// "validated" or "validate_failed" (a concurrent /validate gets 503
// "validating").
//
// After the boot /run, /ready answers "ready_escape" and /validate
// "validate_skipped": nothing restarts, whoever calls (an anomaly when it is
// not the platform).
//
// The first /run from the platform installs the boot configuration by
// calling [Lifecycle.Run] with the envelope's microvmId and runHookPayload;
// this happens at most once per [Server], whatever the concurrency. A body
// that is not such an envelope still consumes the boot /run: rayd stays
// tokenless and the reply says "tokenless"; that is an anomaly. Every later
// /run answers "already_ran", and a /run after /terminate answers
// "terminating"; both are anomalies.
//
// /suspend always answers 200 (anything else would make the platform
// destroy the sandbox). From running or resumed it moves to suspending,
// increments the suspend generation and calls [Lifecycle.Suspend] (close
// every stream, refuse new RPCs but Health, wait for calls in flight, sync
// the file systems; nothing is killed) within 80 % of the declared 30 s:
// "changed", or "budget_exceeded" when the work overran (still 200). A
// repeated /suspend is "unchanged"; one before /run is "unchanged" and an
// anomaly.
//
// /resume from suspending moves to resumed, increments the resume
// generation, records the clock offset (the wall-clock time since the
// /suspend: the paused time), calls [Lifecycle.Resume] (reopen the gate)
// and then [Options].OnResume, and answers "changed" with
// kernel_state_lost. rayd itself has nothing to reseed: it draws randomness
// from getrandom on every use, so a clone of a snapshot draws fresh values;
// OnResume is where kernels will reseed and be probed. A repeated /resume
// is "unchanged".
//
// A stale-suspend watchdog guards each accepted /suspend: a frozen VM shows
// as a jump of more than 5 s in the monotonic clock between its 1 s ticks;
// if none comes within 20 s, no snapshot happened (or a forged /suspend
// stopped the API), so it reopens the gate itself: phase running, the
// resume generation incremented (clients re-subscribe), logged and counted
// ([Status].StaleSuspends).
//
// /terminate answers "terminating", flushes the reply, and then calls
// [Lifecycle.Terminate] in the background with a 10 second deadline, followed
// by [Options.OnTerminated]. A second /terminate answers "unchanged".
//
// Every call, acted upon or not, is appended to a bounded audit ring
// ([Server.Audit]) and logged with its hook, caller class, uid and outcome;
// request bodies, headers and payloads are never logged. Anomalous calls
// (callers other than the platform, bad paths and methods, ill-formed or
// repeated /run, out-of-order hooks) also increment [Server.Anomalies].
package hooks

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/peercred"
)

// PathPrefix is the common prefix of the hook paths.
const PathPrefix = "/aws/lambda-microvms/runtime/v1/"

// Hook names, the last element of their paths.
const (
	HookReady     = "ready"
	HookValidate  = "validate"
	HookRun       = "run"
	HookSuspend   = "suspend"
	HookResume    = "resume"
	HookTerminate = "terminate"
)

// Defaults and limits.
const (
	DefaultMaxConns          = 64
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultAuditSize         = 64
	MaxBodyBytes             = 64 << 10 // request bodies are cut here
	MaxHeaderBytes           = 16 << 10
	TerminateTimeout         = 10 * time.Second // deadline of Lifecycle.Terminate
	ShutdownTimeout          = 5 * time.Second  // graceful shutdown in Serve

	// SuspendBudget and ResumeBudget bound the work of /suspend and
	// /resume: 80 % of the 30 s rayd declares for them.
	SuspendBudget = 24 * time.Second
	ResumeBudget  = 24 * time.Second
	// ValidateBudget bounds /validate: 80 % of the declared 600 s.
	ValidateBudget = 480 * time.Second

	// DefaultStaleSuspend is how long after /suspend the watchdog waits
	// for a freeze before it reopens the gate.
	DefaultStaleSuspend = 20 * time.Second
	// DefaultWatchdogTick is the watchdog's tick.
	DefaultWatchdogTick = time.Second
	// DefaultFreezeJump is the gap between two ticks that means the VM was
	// frozen (snapshotted).
	DefaultFreezeJump = 5 * time.Second

	// SandboxUIDMin is the first uid that belongs to sandbox code.
	SandboxUIDMin = 1000
)

// Outcome says what a hook call did.
type Outcome string

// Outcomes, the contract's closed list.
const (
	OutcomeChanged         Outcome = "changed"          // accepted, state changed
	OutcomeUnchanged       Outcome = "unchanged"        // accepted, nothing to change
	OutcomeIllegal         Outcome = "illegal"          // not allowed from this caller, or not a hook (404/405): nothing done
	OutcomeInstalled       Outcome = "installed"        // /run installed the boot configuration
	OutcomeTokenless       Outcome = "tokenless"        // /run consumed, but the payload or envelope was invalid
	OutcomeAlreadyRan      Outcome = "already_ran"      // /run after the boot /run: nothing done
	OutcomeKernelWarming   Outcome = "kernel_warming"   // /ready before rayd is ready (503)
	OutcomeReadyEscape     Outcome = "ready_escape"     // /ready after /run: nothing restarted
	OutcomeValidating      Outcome = "validating"       // /validate while another runs (503)
	OutcomeValidated       Outcome = "validated"        // /validate: the self-check passed
	OutcomeValidateFailed  Outcome = "validate_failed"  // /validate: the self-check failed
	OutcomeValidateSkipped Outcome = "validate_skipped" // /validate after /run: nothing done
	OutcomeTerminating     Outcome = "terminating"      // /terminate accepted; or any other hook once terminating
	OutcomeBudgetExceeded  Outcome = "budget_exceeded"  // /suspend or /resume overran its budget (still 200)
)

// Phase is rayd's lifecycle phase as the hooks see it.
type Phase string

// Phases; see the package documentation.
const (
	PhaseBooting     Phase = "booting"     // until the first /ready or /run
	PhaseReady       Phase = "ready"       // after /ready, before /run
	PhaseRunning     Phase = "running"     // after the boot /run
	PhaseSuspending  Phase = "suspending"  // after /suspend
	PhaseResumed     Phase = "resumed"     // after /resume; behaves like running
	PhaseTerminating Phase = "terminating" // after /terminate
)

// Caller classifies who made a call; see the package documentation.
type Caller string

// Callers.
const (
	CallerPlatform Caller = "platform"
	CallerSandbox  Caller = "sandbox"
	CallerUnknown  Caller = "unknown"
)

// Lifecycle is what the hooks drive; the daemon implements it over the
// sandbox state, the API's suspend gate and the deadline.
type Lifecycle interface {
	// Run installs the boot configuration once. It returns OutcomeInstalled
	// when the payload was valid, OutcomeTokenless when it was not (rayd then
	// refuses every RPC, but /run still answers 200). Its context is not
	// cancelled when the caller goes away.
	Run(ctx context.Context, microvmID, runHookPayload string) Outcome
	// Terminate stops user processes (SIGTERM, SIGKILL after a grace); called
	// after the 200 is written, with a TerminateTimeout deadline.
	Terminate(ctx context.Context)
	// Suspend quiesces rayd for a snapshot within ctx's deadline: refuse
	// new RPCs but Health, close every open stream, wait for the calls in
	// flight, sync the file systems. It kills nothing. It returns the
	// number of streams it closed.
	Suspend(ctx context.Context) (streamsClosed int)
	// Resume undoes Suspend: after /resume, or when the watchdog gives up
	// waiting for a snapshot.
	Resume(ctx context.Context)
	// Validate is /validate's cheap self-check.
	Validate(ctx context.Context) error
}

// Options configure a [Server]. Only Lifecycle is required.
type Options struct {
	Lifecycle Lifecycle
	Logger    *slog.Logger // nil: discard
	// MaxConns caps concurrent connections; default DefaultMaxConns.
	// Connections over the cap are closed at accept, and callers other than
	// the platform may hold at most half of them (at least one).
	MaxConns int
	// ReadHeaderTimeout cuts a client that does not finish its request
	// header in time; default DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
	// PeerOwner finds the owner of a connection's client socket; default
	// peercred.LookupTCP. Tests swap it.
	PeerOwner    func(local, remote net.Addr) (peercred.Owner, error)
	AuditSize    int    // entries kept by Audit; default DefaultAuditSize
	OnTerminated func() // called once after Lifecycle.Terminate returned
	// PlatformOverUnix says that the platform calls the hooks over a Unix
	// socket only (rayd's --hooks-fd: a rootless sandbox, where the
	// platform, rayd and the sandbox's code share one uid and the uid of a
	// TCP client tells nothing). Every caller over TCP is then sandbox
	// code. Unix callers are told apart the same way with or without it:
	// see the package documentation.
	PlatformOverUnix bool
	// UnixPeer returns the SO_PEERCRED pid and uid of a Unix connection's
	// client, as rayd's namespaces see them; default the kernel's. Tests
	// swap it.
	UnixPeer func(c *net.UnixConn) (pid int32, uid uint32, err error)

	// Ready reports whether rayd is ready to be snapshotted: /ready
	// answers 503 kernel_warming until it is. nil: always ready.
	Ready func() bool
	// OnResume runs after each accepted /resume, once Lifecycle.Resume
	// has reopened the gate, within the resume budget; it reports whether
	// state was lost (kernel_state_lost). rayd has nothing of its own to
	// reseed (it uses getrandom per call); kernels will reseed and be
	// probed here. nil: nothing.
	OnResume func(ctx context.Context) (kernelStateLost bool)

	// Budgets and watchdog timings; zero fields take the defaults
	// (SuspendBudget, ResumeBudget, DefaultStaleSuspend,
	// DefaultWatchdogTick, DefaultFreezeJump). Tests shorten them.
	SuspendBudget time.Duration
	ResumeBudget  time.Duration
	StaleSuspend  time.Duration
	WatchdogTick  time.Duration
	FreezeJump    time.Duration
	// Now is the watchdog's clock; nil: time.Now. Tests move it to fake a
	// freeze.
	Now func() time.Time
}

// AuditEntry records one hook call.
type AuditEntry struct {
	Time    time.Time
	Hook    string // "" for a path that is not a hook
	Caller  Caller
	UID     int64 // -1 when unknown (including platform calls from outside the namespace)
	Outcome Outcome
	Anomaly bool
}

// Status is the hooks' view of the sandbox, for Health.
type Status struct {
	Phase             Phase
	SuspendGeneration uint64 // accepted /suspend calls that moved to suspending
	ResumeGeneration  uint64 // accepted /resume calls, plus watchdog reopens
	// ClockOffset is the wall-clock time between the last accepted
	// /suspend and the /resume that followed it: the paused time.
	ClockOffset     time.Duration
	KernelStateLost bool   // as OnResume last said
	StaleSuspends   uint64 // suspends the watchdog gave up on
}

// Server serves the hooks. Create it with [New].
type Server struct {
	lc           Lifecycle
	log          *slog.Logger
	maxConns     int
	readHeader   time.Duration
	peerOwner    func(local, remote net.Addr) (peercred.Owner, error)
	selfUID      int64                        // rayd's own euid: a caller with it is the platform
	localAddrs   func() ([]netip.Addr, error) // this namespace's addresses; swapped by tests
	onTerminated func()
	overUnix     bool // Options.PlatformOverUnix
	unixPeer     func(c *net.UnixConn) (pid int32, uid uint32, err error)
	readyFn      func() bool
	onResume     func(ctx context.Context) bool
	suspendBdg   time.Duration
	resumeBdg    time.Duration
	staleAfter   time.Duration
	tick         time.Duration
	freezeJump   time.Duration
	now          func() time.Time

	anomalies atomic.Uint64
	stale     atomic.Uint64
	audit     ring

	// work serialises the lifecycle work of /suspend, /resume and the
	// watchdog; it is taken before mu.
	work sync.Mutex

	mu              sync.Mutex
	phase           Phase
	ran             bool // the boot /run has been claimed
	ready           bool
	terminating     bool
	validating      bool
	suspendGen      uint64
	resumeGen       uint64
	suspendedAt     time.Time
	clockOffset     time.Duration
	kernelStateLost bool
	watchStop       chan struct{} // ends the current suspend's watchdog
	closed          bool
	done            chan struct{} // closed by Close
}

// New returns a Server driving opts.Lifecycle, which must not be nil.
func New(opts Options) *Server {
	if opts.Lifecycle == nil {
		panic("hooks: Options.Lifecycle is nil")
	}
	s := &Server{
		lc:           opts.Lifecycle,
		log:          opts.Logger,
		maxConns:     opts.MaxConns,
		readHeader:   opts.ReadHeaderTimeout,
		peerOwner:    opts.PeerOwner,
		localAddrs:   interfaceAddrs,
		onTerminated: opts.OnTerminated,
		phase:        PhaseBooting,
		selfUID:      int64(os.Geteuid()),
		overUnix:     opts.PlatformOverUnix,
		unixPeer:     opts.UnixPeer,
		readyFn:      opts.Ready,
		onResume:     opts.OnResume,
		suspendBdg:   orDefault(opts.SuspendBudget, SuspendBudget),
		resumeBdg:    orDefault(opts.ResumeBudget, ResumeBudget),
		staleAfter:   orDefault(opts.StaleSuspend, DefaultStaleSuspend),
		tick:         orDefault(opts.WatchdogTick, DefaultWatchdogTick),
		freezeJump:   orDefault(opts.FreezeJump, DefaultFreezeJump),
		now:          opts.Now,
		done:         make(chan struct{}),
	}
	if s.unixPeer == nil {
		s.unixPeer = unixPeerCred
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxConns <= 0 {
		s.maxConns = DefaultMaxConns
	}
	if s.readHeader <= 0 {
		s.readHeader = DefaultReadHeaderTimeout
	}
	if s.peerOwner == nil {
		s.peerOwner = peercred.LookupTCP
	}
	if s.now == nil {
		s.now = time.Now
	}
	size := opts.AuditSize
	if size <= 0 {
		size = DefaultAuditSize
	}
	s.audit.entries = make([]AuditEntry, size)
	return s
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Close stops the watchdog, if one runs; the Server keeps answering. Call
// it once rayd stops serving.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
}

// Anomalies returns how many anomalous calls the server has seen.
func (s *Server) Anomalies() uint64 { return s.anomalies.Load() }

// Audit returns a copy of the most recent calls, oldest first.
func (s *Server) Audit() []AuditEntry { return s.audit.snapshot() }

// Phase returns the current lifecycle phase.
func (s *Server) Phase() Phase {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.phase
}

// Status returns the phase, the generations and what the last resume
// recorded.
func (s *Server) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Status{
		Phase:             s.phase,
		SuspendGeneration: s.suspendGen,
		ResumeGeneration:  s.resumeGen,
		ClockOffset:       s.clockOffset,
		KernelStateLost:   s.kernelStateLost,
		StaleSuspends:     s.stale.Load(),
	}
}

// Handler returns the hooks handler. [Server.Serve] uses it with the caller
// identified once per connection at accept. Served by another http.Server,
// it identifies the caller of each request from the request's local and
// remote addresses, which is later than at accept; without a local address
// (as with httptest.NewRecorder) the caller is unknown.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	p := s.peerOf(r)
	hook, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok || !isHook(hook) {
		s.finish(w, http.StatusNotFound, "", p, result{out: OutcomeIllegal}, true)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.finish(w, http.StatusMethodNotAllowed, hook, p, result{out: OutcomeIllegal}, true)
		return
	}
	if !allowed(hook, p.caller) {
		s.finish(w, http.StatusOK, hook, p, result{out: OutcomeIllegal}, true)
		return
	}
	anomaly := p.caller != CallerPlatform
	switch hook {
	case HookRun:
		s.run(w, r, p)
	case HookTerminate:
		s.terminate(w, p)
	case HookReady:
		s.readyHook(w, p, anomaly)
	case HookValidate:
		s.validate(w, p, anomaly)
	case HookSuspend:
		s.suspend(w, p, anomaly)
	case HookResume:
		s.resume(w, p, anomaly)
	}
}

// allowed reports whether caller may call hook at all (T2).
func allowed(hook string, caller Caller) bool {
	switch caller {
	case CallerPlatform:
		return true
	case CallerUnknown:
		// Fail closed: an unidentified caller may be sandbox code that
		// closed its socket before we could look it up.
		return hook != HookRun && hook != HookTerminate
	default: // CallerSandbox, and anything unexpected
		return hook == HookSuspend || hook == HookResume
	}
}

func isHook(name string) bool {
	switch name {
	case HookReady, HookValidate, HookRun, HookSuspend, HookResume, HookTerminate:
		return true
	}
	return false
}

// envelope is the body of /run.
type envelope struct {
	MicrovmID      *string `json:"microvmId"`
	RunHookPayload *string `json:"runHookPayload"`
}

// readEnvelope reads and checks the /run body. It reports false for anything
// but a JSON object with both fields as strings, including bodies over
// MaxBodyBytes and read errors.
func readEnvelope(w http.ResponseWriter, r *http.Request) (microvmID, payload string, ok bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return "", "", false
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil || env.MicrovmID == nil || env.RunHookPayload == nil {
		return "", "", false
	}
	return *env.MicrovmID, *env.RunHookPayload, true
}

// result is what a hook call did, for its reply.
type result struct {
	out             Outcome
	streamsClosed   *int
	kernelStateLost *bool
}

type reply struct {
	Hook              string  `json:"hook"`
	Outcome           Outcome `json:"outcome"`
	Phase             Phase   `json:"phase"`
	SuspendGeneration uint64  `json:"suspend_generation"`
	ResumeGeneration  uint64  `json:"resume_generation"`
	StreamsClosed     *int    `json:"streams_closed,omitempty"`
	KernelStateLost   *bool   `json:"kernel_state_lost,omitempty"`
}

// finish records the call and writes the reply. It records first, so that
// the audit ring and counter include a call by the time its caller has the
// reply.
func (s *Server) finish(w http.ResponseWriter, status int, hook string, p peer, res result, anomaly bool) {
	s.record(hook, p, res.out, anomaly)
	s.mu.Lock()
	rep := reply{
		Hook: hook, Outcome: res.out, Phase: s.phase,
		SuspendGeneration: s.suspendGen, ResumeGeneration: s.resumeGen,
		StreamsClosed: res.streamsClosed, KernelStateLost: res.kernelStateLost,
	}
	s.mu.Unlock()
	body, _ := json.Marshal(rep)
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func (s *Server) record(hook string, p peer, out Outcome, anomaly bool) {
	s.audit.add(AuditEntry{
		Time:    time.Now(),
		Hook:    hook,
		Caller:  p.caller,
		UID:     p.uid,
		Outcome: out,
		Anomaly: anomaly,
	})
	level := slog.LevelInfo
	if anomaly {
		s.anomalies.Add(1)
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("hook", hook),
		slog.String("caller", string(p.caller)),
		slog.Int64("uid", p.uid),
		slog.String("outcome", string(out)),
		slog.Bool("anomaly", anomaly),
	}
	if p.lookup != "" {
		attrs = append(attrs, slog.String("lookup", p.lookup))
	}
	s.log.LogAttrs(context.Background(), level, "hooks: call", attrs...)
}

// ring is a fixed-size audit log.
type ring struct {
	mu      sync.Mutex
	entries []AuditEntry
	next    int  // index of the next write
	full    bool // entries has wrapped
}

func (r *ring) add(e AuditEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries[r.next] = e
	r.next++
	if r.next == len(r.entries) {
		r.next, r.full = 0, true
	}
}

func (r *ring) snapshot() []AuditEntry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]AuditEntry(nil), r.entries[:r.next]...)
	}
	out := make([]AuditEntry, 0, len(r.entries))
	out = append(out, r.entries[r.next:]...)
	return append(out, r.entries[:r.next]...)
}
