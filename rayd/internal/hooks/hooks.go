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
// Every hook answers 200 with a JSON body such as
//
//	{"hook":"run","outcome":"installed","phase":"running"}
//
// where outcome says what the call did (see [Outcome]) and phase is rayd's
// lifecycle phase after it (see [Phase]). Other methods get 405, other paths
// 404, both with outcome "rejected".
//
// # Who is calling
//
// Code inside the sandbox can reach the hooks port over loopback, so a hook
// call is only acted upon when it comes from the platform. When a connection
// is accepted, [Server.Serve] looks up, once, which uid owns the client end of
// the connection (see package peercred) and classifies the caller:
//
//   - [CallerPlatform]: the socket belongs to a uid below 1000 or to rayd's
//     own uid (an unprivileged rayd shares it with its platform), or it is not
//     in this network namespace at all and the client address is not one of
//     this namespace's own addresses (the platform calls over a veth or from
//     the host).
//   - [CallerSandbox]: the socket belongs to a uid of 1000 or more. Every hook
//     answers "ignored", does nothing, and counts as an anomaly.
//   - [CallerUnknown]: the lookup failed, or the client socket was closed or
//     vanished before it could be identified. The hooks that change state
//     (/run and /terminate) answer "ignored" and do nothing; the others are
//     answered normally. Every call counts as an anomaly.
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
// The first /run from the platform installs the boot configuration by calling
// [Lifecycle.Run] with the envelope's microvmId and runHookPayload; this
// happens at most once per [Server], whatever the concurrency. A body that is
// not such an envelope still consumes the boot /run: rayd stays tokenless and
// the reply says "tokenless"; that is an anomaly. Every later /run answers
// "already_ran", and a /run after /terminate answers "terminating"; both are
// anomalies.
//
// /terminate answers "terminating", flushes the reply, and then calls
// [Lifecycle.Terminate] in the background with a 10 second deadline, followed
// by [Options.OnTerminated]. A second /terminate answers "unchanged".
//
// /ready answers "changed" the first time and "unchanged" afterwards;
// /validate, /suspend and /resume answer "unchanged". Their full behaviour is
// left for a later change.
//
// Every call, ignored or not, is appended to a bounded audit ring
// ([Server.Audit]) and logged with its hook, caller class, uid and outcome;
// request bodies, headers and payloads are never logged. Anomalous calls
// (sandbox and unknown callers, rejected requests, ill-formed or repeated
// /run) also increment [Server.Anomalies].
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

	// SandboxUIDMin is the first uid that belongs to sandbox code.
	SandboxUIDMin = 1000
)

// Outcome says what a hook call did.
type Outcome string

const (
	OutcomeInstalled   Outcome = "installed"   // /run installed the boot configuration
	OutcomeTokenless   Outcome = "tokenless"   // /run consumed, but the payload or envelope was invalid
	OutcomeAlreadyRan  Outcome = "already_ran" // /run after the boot /run: nothing done
	OutcomeUnchanged   Outcome = "unchanged"   // accepted, state unchanged
	OutcomeChanged     Outcome = "changed"     // accepted, state changed
	OutcomeTerminating Outcome = "terminating" // /terminate accepted; or /run refused while terminating
	OutcomeIgnored     Outcome = "ignored"     // not acted upon because of who called
	OutcomeRejected    Outcome = "rejected"    // 404 or 405
)

// Phase is rayd's lifecycle phase as the hooks see it.
type Phase string

const (
	PhaseBooting     Phase = "booting"     // until the first accepted /run
	PhaseRunning     Phase = "running"     // after it
	PhaseTerminating Phase = "terminating" // after /terminate
)

// Caller classifies who made a call; see the package documentation.
type Caller string

const (
	CallerPlatform Caller = "platform"
	CallerSandbox  Caller = "sandbox"
	CallerUnknown  Caller = "unknown"
)

// Lifecycle is what the hooks drive; rayd's sandbox state implements it.
type Lifecycle interface {
	// Run installs the boot configuration once. It returns OutcomeInstalled
	// when the payload was valid, OutcomeTokenless when it was not (rayd then
	// refuses every RPC, but /run still answers 200). Its context is not
	// cancelled when the caller goes away.
	Run(ctx context.Context, microvmID, runHookPayload string) Outcome
	// Terminate stops user processes (SIGTERM, SIGKILL after a grace); called
	// after the 200 is written, with a TerminateTimeout deadline.
	Terminate(ctx context.Context)
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

	anomalies atomic.Uint64
	audit     ring

	mu          sync.Mutex
	phase       Phase
	ran         bool // the boot /run has been claimed
	ready       bool
	terminating bool
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
	size := opts.AuditSize
	if size <= 0 {
		size = DefaultAuditSize
	}
	s.audit.entries = make([]AuditEntry, size)
	return s
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
		s.finish(w, http.StatusNotFound, "", p, OutcomeRejected, true)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.finish(w, http.StatusMethodNotAllowed, hook, p, OutcomeRejected, true)
		return
	}
	switch p.caller {
	case CallerPlatform:
	case CallerUnknown:
		if hook == HookRun || hook == HookTerminate {
			// Fail closed: an unidentified caller may be sandbox code
			// that closed its socket before we could look it up.
			s.finish(w, http.StatusOK, hook, p, OutcomeIgnored, true)
			return
		}
	default: // CallerSandbox, and anything unexpected
		s.finish(w, http.StatusOK, hook, p, OutcomeIgnored, true)
		return
	}
	anomaly := p.caller != CallerPlatform
	switch hook {
	case HookRun:
		s.run(w, r, p)
	case HookTerminate:
		s.terminate(w, p)
	case HookReady:
		s.mu.Lock()
		out := OutcomeUnchanged
		if !s.ready {
			s.ready = true
			out = OutcomeChanged
		}
		s.mu.Unlock()
		s.finish(w, http.StatusOK, hook, p, out, anomaly)
	default: // validate, suspend, resume: not implemented yet
		s.finish(w, http.StatusOK, hook, p, OutcomeUnchanged, anomaly)
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

// run handles /run from an accepted caller (the platform).
func (s *Server) run(w http.ResponseWriter, r *http.Request, p peer) {
	// Read the body before claiming the boot /run, so that a slow body
	// does not hold the claim; the claim itself is atomic.
	microvmID, payload, ok := readEnvelope(w, r)

	s.mu.Lock()
	switch {
	case s.ran:
		s.mu.Unlock()
		s.finish(w, http.StatusOK, HookRun, p, OutcomeAlreadyRan, true)
		return
	case s.terminating:
		s.mu.Unlock()
		s.finish(w, http.StatusOK, HookRun, p, OutcomeTerminating, true)
		return
	}
	s.ran = true
	s.mu.Unlock()

	out, anomaly := OutcomeTokenless, true
	if ok {
		out = s.lc.Run(context.WithoutCancel(r.Context()), microvmID, payload)
		anomaly = false
	} else {
		s.log.Warn("hooks: /run envelope is not valid JSON with microvmId and runHookPayload; boot run consumed, rayd stays tokenless",
			slog.String("hook", HookRun), slog.String("caller", string(p.caller)), slog.Int64("uid", p.uid))
	}

	s.mu.Lock()
	if s.phase == PhaseBooting {
		s.phase = PhaseRunning
	}
	s.mu.Unlock()
	s.finish(w, http.StatusOK, HookRun, p, out, anomaly)
}

// terminate handles /terminate from an accepted caller (the platform).
func (s *Server) terminate(w http.ResponseWriter, p peer) {
	s.mu.Lock()
	if s.terminating {
		s.mu.Unlock()
		s.finish(w, http.StatusOK, HookTerminate, p, OutcomeUnchanged, false)
		return
	}
	s.terminating = true
	s.phase = PhaseTerminating
	s.mu.Unlock()

	s.finish(w, http.StatusOK, HookTerminate, p, OutcomeTerminating, false)
	// Push the reply out before user processes start dying; a failed flush
	// means the caller is gone, which does not cancel the termination.
	_ = http.NewResponseController(w).Flush()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), TerminateTimeout)
		defer cancel()
		s.lc.Terminate(ctx)
		s.log.Info("hooks: terminate done", slog.String("hook", HookTerminate))
		if s.onTerminated != nil {
			s.onTerminated()
		}
	}()
}

type reply struct {
	Hook    string  `json:"hook"`
	Outcome Outcome `json:"outcome"`
	Phase   Phase   `json:"phase"`
}

// finish records the call and writes the reply. It records first, so that
// the audit ring and counter include a call by the time its caller has the
// reply.
func (s *Server) finish(w http.ResponseWriter, status int, hook string, p peer, out Outcome, anomaly bool) {
	s.record(hook, p, out, anomaly)
	body, _ := json.Marshal(reply{Hook: hook, Outcome: out, Phase: s.Phase()})
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
