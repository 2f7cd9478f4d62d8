// Package registry holds localvm's microVMs: their state machine, the
// background work that boots, suspends, resumes and tears down each
// sandbox, and the state files that let a restarted platform find its
// sandboxes again.
//
// # States
//
// RunMicrovm creates a microVM in PENDING and answers at once. In the
// background the registry launches the sandbox ([Launcher.Launch]) and
// POSTs the run hook to rayd, exactly as AWS Lambda MicroVMs does:
//
//	POST http://<hooks>/aws/lambda-microvms/runtime/v1/run
//	{"microvmId": "<id>", "runHookPayload": "<payload>"}
//
// A 200 within 30 seconds makes the microVM RUNNING; anything else makes it
// TERMINATING and then TERMINATED, with a stateReason (reasons.go: a closed
// set of codes, "code" or "code: fixed detail"). A RUNNING microVM ends in
// TERMINATED when TerminateMicrovm is called (the terminate hook is
// POSTed, then the sandbox is destroyed: killed_by_user), when
// maximumDurationInSeconds has passed since startedAt, running and
// suspended time alike (max_duration), or when rayd exits by itself
// (timeout, out_of_memory or init_exited). TERMINATED microVMs stay listed
// and gettable for a retention period (20 minutes, as on AWS) and then
// vanish.
//
// # Suspend and resume
//
// SuspendMicrovm moves a RUNNING microVM to SUSPENDING, POSTs rayd's
// suspend hook (any answer will do, within 30 s), freezes the sandbox's
// cgroup ([launcher.Instance.Freeze]) and makes it SUSPENDED. ResumeMicrovm
// thaws it and POSTs the resume hook; the microVM stays SUSPENDED until
// that answers 200 (within 30 s; otherwise it is terminated,
// platform_error) and is RUNNING then. Suspending a SUSPENDED microVM and
// resuming a RUNNING one succeed and do nothing; both answer
// ConflictException for a TERMINATING or TERMINATED one (and Suspend for a
// PENDING one), and ValidationException on a platform without a cgroup
// freezer (rootless, unisolated). Terminating a SUSPENDED microVM thaws it
// first. One goroutine per microVM does all of this work (lifecycle.go), so
// suspend, resume, idle suspension and termination never race; the API
// calls only record what is wanted and wake it.
//
// # Idle policy
//
// A microVM with an idlePolicy is suspended once, for
// maxIdleDurationSeconds, no request through its endpoint proxy was in
// flight and no byte crossed it (the proxy counts both in an
// [activity.Meter]). Unlike AWS, where only bytes count, an open request
// or stream keeps a microVM awake even when silent: an agent waiting on a
// long command must not see its sandbox frozen under it. Once suspended
// (by the policy or otherwise) for suspendedDurationSeconds it is
// terminated (idle). With autoResumeEnabled, a request reaching a
// SUSPENDED microVM through the proxy resumes it and is held until it is
// RUNNING ([Target.Wake]); without it the proxy answers 502.
//
// rayd may ask to be suspended (its lifecycle deadline with
// on_timeout=pause): [launcher.Instance.SuspendRequests]; the registry
// then suspends the microVM as SuspendMicrovm would (at most one such
// request a second).
//
// # Pre-booted sandboxes
//
// With Options.Prebooted > 0 (root platforms only: Launcher.PoolSupport)
// the registry keeps that many sandboxes booted ahead of RunMicrovm, as
// Lambda MicroVMs keeps snapshots: each is rayd up to its ready hook (the
// registry POSTs /ready until it answers 200) with nothing unique in it:
// no token, payload, environment or metadata (rayd installs those on the
// run hook), no Internet access and the default limits. RunMicrovm takes
// the oldest one whose rayd is alive and the microVM becomes it; in the
// background Instance.Assign applies the request's egress (its nftables
// rules) and limits (its cgroup files), then the run hook goes as for any
// microVM. A request whose limits differ from the pool's boots its own
// sandbox, as does one that finds the pool empty; a pooled sandbox whose
// rayd died after it was taken is destroyed and the microVM boots its own
// under the same id.
//
// The design, and why:
//
//   - Each pooled sandbox is booted under its own fresh microVM id (a
//     random UUID nobody has seen), which becomes the id of the microVM it
//     is handed out to: its directory, cgroups, veth, /30 and uid block
//     are already named and owned right, nothing is renamed at hand-out,
//     and its hostname (derived from the id) reveals nothing shared.
//   - Nothing is cloned: every pooled sandbox is launched individually,
//     with namespaces, a uid block, an address and files of its own, and
//     is handed out once. The security model's "cloned snapshot state
//     shared between sandboxes" does not arise: two users of pre-booted
//     sandboxes share exactly what two users of freshly booted ones share.
//   - What a request decides is applied at hand-out and nothing of it
//     before: egress starts closed and opens only for a request that asks
//     (and the launcher deletes a sandbox's conntrack entries when it
//     ends, and those of every free address at start-up, so that a reused
//     address carries nothing of its former holder).
//   - Pooled sandboxes are not microVMs: they are not listed, not
//     gettable, have no state file and do not count as a user's. They
//     fill only capacity users leave free under MaxSandboxes: the refill
//     stops at it (a sandbox it booted meanwhile is discarded when users
//     took the room), and a hand-out turns a pooled sandbox into a user's,
//     so no user is refused because of the pool and the machine is not
//     oversubscribed.
//   - One refill goroutine boots one sandbox at a time, only while no
//     RunMicrovm boot (a fresh launch, or a hand-out until its run hook
//     has answered) is in progress and 150 ms after the last one ended,
//     so refills compete neither with users' creates nor with the first
//     commands that follow them; a failed boot backs off (100 ms doubling
//     to 10 s, reset when a microVM ends). A pooled sandbox whose rayd
//     exits is dropped and replaced; hand-outs skip dead ones.
//   - Hand-out and Close both take the pool under the registry's lock:
//     a sandbox is either handed out (and the registry's WaitGroup covers
//     its teardown) or drained by Close, which terminates every pooled
//     sandbox (they belong to no one) and cancels a boot in progress.
//   - A platform killed with its pool leaves sandboxes without state
//     files: the next Open's sweep removes their cgroups, processes,
//     veths, rules and uid blocks, and their directories.
//
// # State directory
//
// The registry keeps one JSON file per microVM, <StateDir>/vms/<id>.json
// (0600, replaced atomically on every change), with the public fields and
// the launcher's [launcher.Record]; it never stores the run hook payload.
// Each sandbox also gets a private directory <StateDir>/vms/<id>/ (0700),
// where rayd's output goes to rayd.log. [Open] reads the files back:
// every RUNNING, SUSPENDING or SUSPENDED microVM is re-adopted
// ([Launcher.Adopt]) when its sandbox is still alive (a SUSPENDED one stays
// SUSPENDED and frozen, a SUSPENDING one is suspended again) and marked
// TERMINATED (platform_shutdown) otherwise; then [Launcher.Sweep] removes
// what belongs to no kept sandbox. [Registry.Close] does not terminate
// sandboxes: they survive a platform restart.
package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/rayito-dev/rayito/localvm/internal/activity"
	"github.com/rayito-dev/rayito/localvm/internal/launcher"
	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
)

// Launcher starts, re-adopts and cleans up sandboxes; package launcher
// implements it.
type Launcher interface {
	// Launch starts one sandbox. It returns once rayd runs; the registry
	// then calls the run hook.
	Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error)
	// Adopt takes over a sandbox a previous platform process launched. It
	// fails when the sandbox is gone.
	Adopt(rec launcher.Record) (launcher.Instance, error)
	// Cleanup removes what is left of a sandbox that could not be adopted.
	Cleanup(rec launcher.Record) error
	// Sweep removes every sandbox trace that belongs to none of keep.
	Sweep(keep []launcher.Record) error
	// Privileged reports whether sandboxes get namespaces and cgroups.
	Privileged() bool
	// SuspendSupport is nil when sandboxes can be suspended (they have a
	// cgroup freezer), else an error whose text says why not.
	SuspendSupport() error
	// PoolSupport is nil when sandboxes can be launched before the
	// request they are handed out for (Instance.Assign applies its
	// egress and limits), else an error whose text says why not.
	PoolSupport() error
}

// Minter mints the port-scoped auth tokens of CreateMicrovmAuthToken;
// package authtoken implements it. Errors that are the caller's fault
// must be *Error values of type ValidationException (wrap the minter to
// convert its own error type); any other error answers
// InternalServerException.
type Minter interface {
	Mint(microvmID string, ports []microvmsapi.AllowedPort, ttl time.Duration) (token string, expires time.Time, err error)
}

// EndpointSuffix ends every local microVM endpoint: "<uuid>.microvms.localhost".
const EndpointSuffix = ".microvms.localhost"

// DefaultMaxSandboxes is the default of Options.MaxSandboxes.
const DefaultMaxSandboxes = 64

// DefaultImageVersion is the imageVersion of a microVM run without one.
const DefaultImageVersion = "1.0"

// Hook paths and timeouts.
const (
	HookPathPrefix = "/aws/lambda-microvms/runtime/v1/"
	// RunHookTimeout bounds the run hook, retries included: rayd may
	// still be binding its hooks port when Launch returns.
	RunHookTimeout = 30 * time.Second
	// TerminateHookTimeout bounds the terminate hook.
	TerminateHookTimeout = 10 * time.Second
	// SuspendHookTimeout bounds the suspend hook (its answer does not
	// matter: the sandbox is frozen next).
	SuspendHookTimeout = 30 * time.Second
	// ResumeHookTimeout bounds the resume hook, retries included.
	ResumeHookTimeout = 30 * time.Second
	// TeardownTimeout bounds Instance.Terminate.
	TeardownTimeout = 60 * time.Second
	// FreezerTimeout bounds a freeze or a thaw of the sandbox's cgroup.
	FreezerTimeout = 15 * time.Second
)

// lifecycleInterval is the least time between two suspensions rayd asks
// for (its lifecycle channel).
const lifecycleInterval = time.Second

// Options configure a Registry.
type Options struct {
	// StateDir is the platform's state directory (see DefaultStateDir);
	// required. The registry uses StateDir/vms.
	StateDir string
	// Launcher and Minter are required.
	Launcher Launcher
	Minter   Minter
	// Logger receives state changes; it never gets tokens or payloads.
	Logger *slog.Logger
	// MaxSandboxes bounds the microVMs that are not TERMINATED; RunMicrovm
	// beyond it answers ServiceQuotaExceededException. 0 means
	// DefaultMaxSandboxes.
	MaxSandboxes int
	// TerminatedRetention is how long TERMINATED microVMs stay listed; 0
	// means microvmsapi.TerminatedListedFor (20 minutes).
	TerminatedRetention time.Duration
	// RunHookTimeout, TerminateHookTimeout and TeardownTimeout override
	// the package defaults when positive (for tests).
	RunHookTimeout       time.Duration
	TerminateHookTimeout time.Duration
	TeardownTimeout      time.Duration
	// RunWait is how long Run waits for a new microVM to leave PENDING
	// (to be RUNNING, or to have failed) before it answers. 0 answers at
	// once with PENDING, as the AWS service does; the local platform waits
	// so that a client need not poll for a boot of a few tens of
	// milliseconds. A caller's cancelled context ends the wait early.
	RunWait time.Duration
	// Dial dials sandboxes' hook addresses; nil means a net.Dialer. The
	// real launcher's addresses of rootless sandboxes need its DialContext.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// SuspendHookTimeout and ResumeHookTimeout override the package
	// defaults when positive (for tests).
	SuspendHookTimeout time.Duration
	ResumeHookTimeout  time.Duration
	// IdleUnit is the length of one "second" of idlePolicy's durations
	// (maxIdleDurationSeconds, suspendedDurationSeconds); 0 means
	// time.Second. Tests shorten it; the API still demands at least 60.
	IdleUnit time.Duration
	// Prebooted is the number of pre-booted sandboxes the registry keeps
	// ready for RunMicrovm (see the package documentation); 0: none. At
	// most MaxPrebooted. It needs a launcher whose PoolSupport is nil:
	// with any other the registry logs why once and keeps no pool.
	Prebooted int
	// Templates resolves images other than the platform's own two to a
	// template's layer (localvm/internal/templates); nil: no templates,
	// and such an image does not exist.
	Templates Templates
}

// Templates resolves a template name to its layer directory.
type Templates interface {
	// Layer returns the directory of the ready layer of template name, or
	// an error wrapping ErrNoTemplate.
	Layer(name string) (string, error)
}

// ErrNoTemplate is what Templates.Layer wraps for a name without a ready
// layer.
var ErrNoTemplate = errors.New("no such template")

// Registry is the set of microVMs. It is safe for concurrent use.
type Registry struct {
	log        *slog.Logger
	launcher   Launcher
	minter     Minter
	vmsDir     string
	max        int
	retention  time.Duration
	runTO      time.Duration
	termTO     time.Duration
	teardownTO time.Duration
	suspendTO  time.Duration
	resumeTO   time.Duration
	idleUnit   time.Duration
	runWait    time.Duration
	hc         *http.Client
	seq        atomic.Uint64
	templates  Templates

	// base is cancelled by Close: it aborts launches in progress and
	// releases the goroutines that watch running sandboxes.
	base       context.Context
	cancelBase context.CancelFunc
	wg         sync.WaitGroup

	// pool of pre-booted sandboxes (pool.go); its fields marked mu are
	// guarded by mu.
	pool pool

	mu     sync.Mutex
	closed bool
	// draining: Drain has begun; Run answers ErrClosed and the pool
	// boots no more, while everything else still answers.
	draining   bool
	vms        map[string]*vm
	byEndpoint map[string]*vm
	byToken    map[string]*vm
}

// vm is one microVM. Fields marked "mu" are guarded by Registry.mu.
type vm struct {
	id          string
	endpoint    string
	seq         uint64
	dir         string
	clientToken string
	fingerprint string

	layer string    // a template's layer directory; "": none
	image imagePlan // what its image name resolved to

	pub  microvmsapi.Microvm // mu
	inst launcher.Instance   // mu; nil until launched or adopted
	rec  *launcher.Record    // mu
	gen  uint64              // mu; bumped on every change to persist

	booted      chan struct{} // closed when boot has finished (a waiting Run answers)
	bootOnce    sync.Once
	stop        chan struct{}      // closed on the move to TERMINATING
	done        chan struct{}      // closed on the move to TERMINATED
	cancelStart context.CancelFunc // mu; aborts Launch and the run hook
	timer       *time.Timer        // mu; maximum duration
	// pooled is the pre-booted sandbox Run took for v (nil: v boots its
	// own); set before v's lifecycle starts, which then owns it.
	pooled *pooled

	// Suspend and resume: the API and the proxy set want and kick the
	// lifecycle goroutine, which alone does the work (converge).
	want        want          // mu
	kick        chan struct{} // buffered 1
	changed     chan struct{} // mu; closed and replaced on every state change
	suspendedAt *time.Time    // mu; when it became SUSPENDED (persisted)
	// dirty: the sandbox may have seen the suspend hook or a freeze since
	// it last ran (mu).
	dirty bool
	// meter counts the endpoint proxy's traffic (idle policy).
	meter activity.Meter

	fileMu  sync.Mutex
	written uint64 // fileMu: gen of the file on disk
	removed bool   // fileMu: files deleted, write no more
}

// Open opens the registry in opts.StateDir: it loads the state files,
// re-adopts the sandboxes that are still alive, marks the others
// TERMINATED and cleans up after them, and sweeps the launcher's leftovers.
// ctx bounds that work.
func Open(ctx context.Context, opts Options) (*Registry, error) {
	if opts.StateDir == "" || opts.Launcher == nil || opts.Minter == nil {
		return nil, errors.New("registry: StateDir, Launcher and Minter are required")
	}
	r := &Registry{
		log:        opts.Logger,
		launcher:   opts.Launcher,
		minter:     opts.Minter,
		templates:  opts.Templates,
		vmsDir:     VMsDir(opts.StateDir),
		max:        opts.MaxSandboxes,
		retention:  opts.TerminatedRetention,
		runTO:      orDefault(opts.RunHookTimeout, RunHookTimeout),
		termTO:     orDefault(opts.TerminateHookTimeout, TerminateHookTimeout),
		runWait:    max(opts.RunWait, 0),
		teardownTO: orDefault(opts.TeardownTimeout, TeardownTimeout),
		suspendTO:  orDefault(opts.SuspendHookTimeout, SuspendHookTimeout),
		resumeTO:   orDefault(opts.ResumeHookTimeout, ResumeHookTimeout),
		idleUnit:   orDefault(opts.IdleUnit, time.Second),
		vms:        map[string]*vm{},
		byEndpoint: map[string]*vm{},
		byToken:    map[string]*vm{},
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.max <= 0 {
		r.max = DefaultMaxSandboxes
	}
	if r.retention <= 0 {
		r.retention = microvmsapi.TerminatedListedFor
	}
	r.hc = &http.Client{Transport: &http.Transport{
		Proxy:             nil, // hooks are local: never through HTTP_PROXY
		DisableKeepAlives: true,
		DialContext:       opts.Dial,
	}}
	for _, d := range []string{opts.StateDir, r.vmsDir} {
		if err := ensureDir(d); err != nil {
			return nil, fmt.Errorf("registry: state dir: %w", err)
		}
	}
	r.base, r.cancelBase = context.WithCancel(context.WithoutCancel(ctx))
	if err := r.recover(ctx); err != nil {
		r.cancelBase()
		return nil, err
	}
	if n := min(opts.Prebooted, MaxPrebooted); n > 0 {
		if err := r.launcher.PoolSupport(); err != nil {
			r.log.Warn("registry: no pre-booted sandboxes: "+noPoolText(err)+" Every sandbox boots on request.", "prebooted", n)
		} else {
			r.pool.target = n
			r.pool.kick = make(chan struct{}, 1)
			r.wg.Add(1)
			go r.refill()
			r.log.Info("registry: keeping pre-booted sandboxes", "prebooted", n)
		}
	}
	return r, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// now is the registry's clock: UTC, millisecond precision, no monotonic
// reading, so that the times survive a round trip through the state files.
func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// Run creates a microVM and starts it in the background; it answers the
// microVM in PENDING, or, with Options.RunWait, once the boot is over
// (RUNNING, or TERMINATING after a failed boot). A repeated clientToken with the same input answers
// the microVM created first, with a different input ConflictException.
func (r *Registry) Run(ctx context.Context, in microvmsapi.RunMicrovmInput) (microvmsapi.Microvm, error) {
	if err := normalizeRun(&in); err != nil {
		return microvmsapi.Microvm{}, err
	}
	if in.IdlePolicy != nil {
		if err := r.launcher.SuspendSupport(); err != nil {
			return microvmsapi.Microvm{}, validationErr("idlePolicy needs suspend: " + noSuspendText(err))
		}
	}
	fp := fingerprint(in)
	u, err := uuid.NewRandom()
	if err != nil {
		return microvmsapi.Microvm{}, fmt.Errorf("registry: uuid: %w", err)
	}
	id, endpoint := "microvm-"+u.String(), u.String()+EndpointSuffix
	payload := in.RunHookPayload
	in.RunHookPayload = ""
	img, err := r.resolveImage(in.ImageIdentifier)
	if err != nil {
		return microvmsapi.Microvm{}, err
	}
	spec := img.spec("", "", in.EgressNetworkConnectors)

	r.mu.Lock()
	if r.closed || r.draining {
		r.mu.Unlock()
		return microvmsapi.Microvm{}, ErrClosed
	}
	purged := r.purgeLocked(now())
	if in.ClientToken != "" {
		if prev := r.byToken[in.ClientToken]; prev != nil {
			out := clone(prev.pub)
			r.mu.Unlock()
			r.removeFiles(purged)
			if prev.fingerprint != fp {
				return microvmsapi.Microvm{}, conflictErr("The clientToken was already used with a different request.")
			}
			return out, nil
		}
	}
	if r.activeLocked() >= r.max {
		r.mu.Unlock()
		r.removeFiles(purged)
		return microvmsapi.Microvm{}, &Error{Type: microvmsapi.ServiceQuotaExceededException,
			Message: fmt.Sprintf("At most %d microVMs may exist that are not TERMINATED.", r.max)}
	}
	// A pre-booted sandbox, when the pool has one: v takes its id (its
	// directory, cgroups, veth and uid block are named after it). From
	// here on the registry's WaitGroup covers it, so that Close waits for
	// its teardown whatever happens to this call.
	pl := r.takePooledLocked(spec)
	if pl != nil {
		id, endpoint = pl.id, pl.endpoint
		r.wg.Add(1)
	}
	v := r.newVM(id, endpoint, pl, img, in, fp)
	if pl != nil {
		// Its record is in the first state file: a crash before the
		// run hook leaves a PENDING microVM that the next Open tears down.
		rec := pl.inst.Record()
		v.inst, v.rec = pl.inst, &rec
	}
	r.insertLocked(v)
	if r.pool.on() {
		r.pool.users++
	}
	r.mu.Unlock()
	r.removeFiles(purged)

	// The directory and the first state file exist before anything is
	// launched, so that a crash mid-launch leaves a record to clean up.
	if err := r.createFiles(v); err != nil {
		return microvmsapi.Microvm{}, r.unstore(v, pl, err)
	}

	r.mu.Lock()
	if r.closed {
		r.requestTerminateLocked(v, ReasonPlatformStopped)
		r.mu.Unlock()
		if pl != nil {
			r.teardown(v, pl.inst)
			r.wg.Done()
		} else {
			r.finish(v)
		}
		r.userBootDone()
		return microvmsapi.Microvm{}, ErrClosed
	}
	var startCtx context.Context
	startCtx, v.cancelStart = context.WithCancel(r.base)
	r.armTimerLocked(v, time.Duration(in.MaximumDurationInSeconds)*time.Second)
	out := clone(v.pub)
	if pl == nil {
		r.wg.Add(1)
	}
	r.mu.Unlock()

	if pl != nil {
		r.log.Info("registry: microVM pending (pre-booted)", "microvm", id)
	} else {
		r.log.Info("registry: microVM pending", "microvm", id)
	}
	go r.lifecycle(v, startCtx, payload, nil)
	if r.runWait <= 0 {
		return out, nil
	}
	return r.waitBooted(ctx, v), nil
}

// newVM is the record of a new microVM id of input in (fingerprint fp)
// on image img, PENDING; pl is the pre-booted sandbox it takes, if any.
func (r *Registry) newVM(id, endpoint string, pl *pooled, img imagePlan, in microvmsapi.RunMicrovmInput, fp string) *vm {
	started := now()
	v := &vm{
		id:          id,
		endpoint:    endpoint,
		pooled:      pl,
		seq:         r.seq.Add(1),
		dir:         filepath.Join(r.vmsDir, id),
		clientToken: in.ClientToken,
		fingerprint: fp,
		booted:      make(chan struct{}),
		stop:        make(chan struct{}),
		done:        make(chan struct{}),
		kick:        make(chan struct{}, 1),
		changed:     make(chan struct{}),
		gen:         1,
		layer:       img.layer,
		image:       img,
	}
	v.pub = microvmsapi.Microvm{
		MicrovmID:                id,
		State:                    microvmsapi.StatePending,
		Endpoint:                 v.endpoint,
		ImageArn:                 in.ImageIdentifier,
		ImageVersion:             in.ImageVersion,
		StartedAt:                &started,
		ExecutionRoleArn:         in.ExecutionRoleArn,
		IdlePolicy:               in.IdlePolicy,
		Logging:                  in.Logging,
		MaximumDurationInSeconds: in.MaximumDurationInSeconds,
		IngressNetworkConnectors: in.IngressNetworkConnectors,
		EgressNetworkConnectors:  in.EgressNetworkConnectors,
	}
	if v.pub.ImageVersion == "" {
		v.pub.ImageVersion = DefaultImageVersion
	}
	return v
}

// unstore undoes a Run whose microVM v could not be stored (err): it
// forgets v, discards its pre-booted sandbox pl (if any) and removes its
// files.
func (r *Registry) unstore(v *vm, pl *pooled, err error) error {
	r.mu.Lock()
	r.deleteLocked(v)
	r.mu.Unlock()
	if pl != nil {
		r.discardPooled(pl)
		r.wg.Done()
	}
	r.removeFiles([]*vm{v})
	r.userBootDone()
	r.log.Error("registry: cannot store a new microVM", "microvm", v.id, "err", err)
	return fmt.Errorf("registry: store %s: %w", v.id, err)
}

// waitBooted waits for v's boot, at most Options.RunWait or until ctx
// ends, and answers v as it is then.
func (r *Registry) waitBooted(ctx context.Context, v *vm) microvmsapi.Microvm {
	t := time.NewTimer(r.runWait)
	defer t.Stop()
	select {
	case <-v.booted:
	case <-t.C:
	case <-ctx.Done():
	}
	r.mu.Lock()
	out := clone(v.pub)
	r.mu.Unlock()
	return out
}

// markBooted releases the Run waiting for v's boot.
func (v *vm) markBooted() { v.bootOnce.Do(func() { close(v.booted) }) }

// fingerprint identifies a normalized RunMicrovm input for clientToken
// idempotency; the payload enters only through the hash.
func fingerprint(in microvmsapi.RunMicrovmInput) string {
	b, _ := json.Marshal(in)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Get returns one microVM.
func (r *Registry) Get(id string) (microvmsapi.Microvm, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return microvmsapi.Microvm{}, ErrClosed
	}
	purged := r.purgeLocked(now())
	v := r.vms[id]
	var out microvmsapi.Microvm
	if v != nil {
		out = clone(v.pub)
	}
	r.mu.Unlock()
	r.removeFiles(purged)
	if v == nil {
		return microvmsapi.Microvm{}, ErrNotFound
	}
	return out, nil
}

// Terminate moves a PENDING or RUNNING microVM to TERMINATING and tears it
// down in the background (terminate hook, then the sandbox); it answers
// before the microVM is TERMINATED. Terminating a microVM that is already
// TERMINATING or TERMINATED does nothing and succeeds.
func (r *Registry) Terminate(id string) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	purged := r.purgeLocked(now())
	v := r.vms[id]
	changed := v != nil && r.requestTerminateLocked(v, ReasonKilledByUser)
	r.mu.Unlock()
	r.removeFiles(purged)
	if v == nil {
		return ErrNotFound
	}
	if changed {
		r.log.Info("registry: microVM terminating", "microvm", id, "reason", ReasonKilledByUser)
		r.persist(v)
	}
	return nil
}

// Suspend suspends a RUNNING microVM: SUSPENDING at once, then, in the
// background, the suspend hook and the freeze, and SUSPENDED. It waits
// for SUSPENDED at most Options.RunWait (or until ctx ends), and succeeds
// for a microVM that is SUSPENDING or SUSPENDED already. A PENDING,
// TERMINATING or TERMINATED microVM is a ConflictException; a platform
// that cannot suspend answers ValidationException.
func (r *Registry) Suspend(ctx context.Context, id string) error {
	return r.setWant(ctx, id, wantSuspended)
}

// Resume resumes a SUSPENDED (or SUSPENDING) microVM: in the background
// the cgroup is thawed and the resume hook POSTed; the microVM is RUNNING
// once that answers 200. It waits for RUNNING at most Options.RunWait (or
// until ctx ends), and succeeds for a RUNNING or PENDING microVM (nothing
// to do). A TERMINATING or TERMINATED microVM is a ConflictException; a
// platform that cannot suspend answers ValidationException.
func (r *Registry) Resume(ctx context.Context, id string) error {
	return r.setWant(ctx, id, wantRunning)
}

func (r *Registry) setWant(ctx context.Context, id string, w want) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	purged := r.purgeLocked(now())
	v := r.vms[id]
	err := ErrNotFound
	if v != nil {
		err = r.setWantLocked(v, w, "api")
	}
	r.mu.Unlock()
	r.removeFiles(purged)
	if err != nil {
		return err
	}
	r.persist(v)
	r.waitState(ctx, v, r.runWait, func(s microvmsapi.State) bool {
		if w == wantSuspended {
			return s != microvmsapi.StateSuspending && s != microvmsapi.StateRunning
		}
		return s != microvmsapi.StateSuspending && s != microvmsapi.StateSuspended
	})
	return nil
}

// setWantLocked records that v should be suspended or running and wakes
// its lifecycle goroutine. A RUNNING microVM to suspend becomes
// SUSPENDING at once. why names the cause for the log ("api", "idle",
// "rayd", "proxy").
func (r *Registry) setWantLocked(v *vm, w want, why string) error {
	if err := r.launcher.SuspendSupport(); err != nil {
		t := noSuspendText(err)
		return validationErr(strings.ToUpper(t[:1]) + t[1:])
	}
	switch v.pub.State {
	case microvmsapi.StateTerminating, microvmsapi.StateTerminated:
		return conflictErr("The microVM is terminated.")
	case microvmsapi.StatePending:
		if w == wantSuspended {
			return conflictErr("The microVM is not running yet.")
		}
		return nil // it will be RUNNING
	case microvmsapi.StateRunning:
		if w == wantSuspended {
			r.setStateLocked(v, microvmsapi.StateSuspending)
		}
	}
	if v.want != w {
		r.log.Info("registry: microVM "+w.String()+" requested", "microvm", v.id, "by", why)
	}
	v.want = w
	select {
	case v.kick <- struct{}{}:
	default:
	}
	return nil
}

// noSuspendText is the sentence of a SuspendSupport error, as the API
// says it: "suspend needs the root platform's cgroup freezer: this
// platform runs rootless (no cgroups)."
func noSuspendText(err error) string {
	t := strings.TrimPrefix(err.Error(), "launcher: ")
	if t == "" {
		t = "suspend is not supported by this platform"
	}
	return strings.TrimSuffix(t, ".") + "."
}

// waitState waits until done(v's state) holds or v is TERMINATING or
// TERMINATED, at most d, or until ctx ends.
func (r *Registry) waitState(ctx context.Context, v *vm, d time.Duration, done func(microvmsapi.State) bool) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		r.mu.Lock()
		s, ch := v.pub.State, v.changed
		r.mu.Unlock()
		if done(s) || s == microvmsapi.StateTerminating || s == microvmsapi.StateTerminated {
			return
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// setStateLocked moves v to s and wakes whoever waits for a change.
func (r *Registry) setStateLocked(v *vm, s microvmsapi.State) {
	v.pub.State = s
	v.gen++
	close(v.changed)
	v.changed = make(chan struct{})
}

// want is what the lifecycle goroutine works towards once a microVM runs.
type want int

const (
	wantRunning want = iota
	wantSuspended
)

func (w want) String() string {
	if w == wantSuspended {
		return "suspend"
	}
	return "resume"
}

// CreateAuthToken mints a token for the microVM's endpoint proxy. The
// microVM must exist and not be TERMINATING or TERMINATED.
func (r *Registry) CreateAuthToken(id string, in microvmsapi.CreateMicrovmAuthTokenInput) (microvmsapi.CreateMicrovmAuthTokenOutput, error) {
	if err := checkAuthToken(&in); err != nil {
		return microvmsapi.CreateMicrovmAuthTokenOutput{}, err
	}
	m, err := r.Get(id)
	if err != nil {
		return microvmsapi.CreateMicrovmAuthTokenOutput{}, err
	}
	if m.State == microvmsapi.StateTerminating || m.State == microvmsapi.StateTerminated {
		return microvmsapi.CreateMicrovmAuthTokenOutput{}, conflictErr("The microVM is terminated.")
	}
	tok, _, err := r.minter.Mint(id, in.AllowedPorts, time.Duration(in.ExpirationInMinutes)*time.Minute)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return microvmsapi.CreateMicrovmAuthTokenOutput{}, e
		}
		return microvmsapi.CreateMicrovmAuthTokenOutput{}, fmt.Errorf("registry: mint: %w", err)
	}
	return microvmsapi.CreateMicrovmAuthTokenOutput{AuthToken: map[string]string{microvmsapi.AuthTokenResponseKey: tok}}, nil
}

// TerminateAll terminates every microVM that is not TERMINATED and waits
// until they all are, or until ctx ends.
func (r *Registry) TerminateAll(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	var changed, waiting []*vm
	for _, v := range r.vms {
		if r.requestTerminateLocked(v, ReasonTerminateAll) {
			changed = append(changed, v)
		}
		if v.pub.State != microvmsapi.StateTerminated {
			waiting = append(waiting, v)
		}
	}
	r.mu.Unlock()
	for _, v := range changed {
		r.persist(v)
	}
	for _, v := range waiting {
		select {
		case <-v.done:
		case <-ctx.Done():
			return fmt.Errorf("registry: terminate all: %w", ctx.Err())
		}
	}
	return nil
}

// Drain shuts the platform's sandboxes down while it still serves: from
// now on Run answers ErrClosed and the pool boots no more, then every
// microVM is terminated (TerminateAll, reason platform_shutdown). A client
// that follows a sandbox reads why it ended, instead of finding the
// platform gone. Close follows it.
func (r *Registry) Drain(ctx context.Context) error {
	r.mu.Lock()
	r.draining = true
	r.mu.Unlock()
	return r.TerminateAll(ctx)
}

// Close stops the registry's timers and background work and waits for it,
// or until ctx ends. It does not terminate microVMs' sandboxes: RUNNING
// ones keep running and a later Open re-adopts them; launches still in
// progress are aborted. The pre-booted sandboxes of the pool are
// terminated (a later Open would find them without a state file and sweep
// them anyway). Every method but Lookup answers ErrClosed afterwards.
func (r *Registry) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	for _, v := range r.vms {
		if v.timer != nil {
			v.timer.Stop()
		}
	}
	// The pool's sandboxes are nobody's: they end with the platform (one
	// the refill is booting ends when its launch is cancelled, or right
	// after it).
	drained := r.pool.ready
	r.pool.ready = nil
	for _, p := range drained {
		close(p.gone)
	}
	r.mu.Unlock()
	r.cancelBase()
	r.discardAll(drained)
	waited := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-ctx.Done():
		return fmt.Errorf("registry: close: %w", ctx.Err())
	}
	r.hc.CloseIdleConnections()
	return nil
}

// insertLocked adds v to the indexes.
func (r *Registry) insertLocked(v *vm) {
	r.vms[v.id] = v
	r.byEndpoint[v.endpoint] = v
	if v.clientToken != "" {
		r.byToken[v.clientToken] = v
	}
}

// deleteLocked removes v from the indexes.
func (r *Registry) deleteLocked(v *vm) {
	delete(r.vms, v.id)
	if r.byEndpoint[v.endpoint] == v {
		delete(r.byEndpoint, v.endpoint)
	}
	if v.clientToken != "" && r.byToken[v.clientToken] == v {
		delete(r.byToken, v.clientToken)
	}
}

// activeLocked counts the microVMs that are not TERMINATED.
func (r *Registry) activeLocked() int {
	n := 0
	for _, v := range r.vms {
		if v.pub.State != microvmsapi.StateTerminated {
			n++
		}
	}
	return n
}

// expiredLocked reports whether v is TERMINATED for longer than the
// retention period.
func (r *Registry) expiredLocked(v *vm, t time.Time) bool {
	return v.pub.State == microvmsapi.StateTerminated && v.pub.TerminatedAt != nil &&
		t.Sub(*v.pub.TerminatedAt) >= r.retention
}

// purgeLocked drops the expired microVMs from the indexes and returns
// them; the caller removes their files with removeFiles after unlocking.
func (r *Registry) purgeLocked(t time.Time) []*vm {
	var out []*vm
	for _, v := range r.vms {
		if r.expiredLocked(v, t) {
			r.deleteLocked(v)
			out = append(out, v)
		}
	}
	return out
}

// armTimerLocked starts v's maximum-duration timer to fire after d. It
// runs in every state until TERMINATED: suspended time counts.
func (r *Registry) armTimerLocked(v *vm, d time.Duration) {
	v.timer = time.AfterFunc(max(d, 0), func() {
		r.mu.Lock()
		changed := !r.closed && r.requestTerminateLocked(v, ReasonMaxDuration)
		r.mu.Unlock()
		if changed {
			r.log.Info("registry: microVM terminating", "microvm", v.id, "reason", ReasonMaxDuration)
			r.persist(v)
		}
	})
}

// requestTerminateLocked moves a PENDING, RUNNING, SUSPENDING or
// SUSPENDED v to TERMINATING with reason and wakes its lifecycle
// goroutine, which tears it down (thawing it first). It reports whether v
// changed (the caller then persists it).
func (r *Registry) requestTerminateLocked(v *vm, reason string) bool {
	switch v.pub.State {
	case microvmsapi.StatePending, microvmsapi.StateRunning, microvmsapi.StateSuspending, microvmsapi.StateSuspended:
	default:
		return false
	}
	v.pub.StateReason = reason
	r.setStateLocked(v, microvmsapi.StateTerminating)
	close(v.stop)
	if v.cancelStart != nil {
		v.cancelStart()
	}
	return true
}

// clone deep-copies a Microvm so that callers never share its pointers.
func clone(m microvmsapi.Microvm) microvmsapi.Microvm {
	if m.StartedAt != nil {
		t := *m.StartedAt
		m.StartedAt = &t
	}
	if m.TerminatedAt != nil {
		t := *m.TerminatedAt
		m.TerminatedAt = &t
	}
	if m.IdlePolicy != nil {
		p := *m.IdlePolicy
		m.IdlePolicy = &p
	}
	if m.Logging != nil {
		l := *m.Logging
		if l.CloudWatch != nil {
			cw := *l.CloudWatch
			l.CloudWatch = &cw
		}
		if l.Disabled != nil {
			l.Disabled = &struct{}{}
		}
		m.Logging = &l
	}
	m.IngressNetworkConnectors = cloneStrings(m.IngressNetworkConnectors)
	m.EgressNetworkConnectors = cloneStrings(m.EgressNetworkConnectors)
	return m
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

// DefaultStateDir is the platform's state directory:
// $XDG_STATE_HOME/rayito/localvm when XDG_STATE_HOME is an absolute path,
// else /var/lib/rayito/localvm for root, else
// ~/.local/state/rayito/localvm (the contract its clients share:
// proto/localplatform).
func DefaultStateDir() string { return localplatform.DefaultStateDir(os.Getenv, os.Geteuid()) }

// LayersInUse returns the template layers of the microVMs that are not
// TERMINATED (their sandboxes may have them mounted).
func (r *Registry) LayersInUse() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	in := map[string]bool{}
	for _, v := range r.vms {
		if v.layer != "" && v.pub.State != microvmsapi.StateTerminated {
			in[v.layer] = true
		}
	}
	return in
}

// imagePlan is what an image name resolves to on the local platform.
type imagePlan struct {
	// base is local, local-root, or any other name (the host's /usr).
	base string
	// layer is a template's layer directory ("": none).
	layer string
	// memory is the size a "-<size>" suffix asked for, in bytes (0: the
	// default).
	memory int64
}

// spec is the launch spec of a sandbox of the image.
func (p imagePlan) spec(id, dir string, egress []string) launcher.Spec {
	spec := sandboxSpec(id, dir, p.base, egress)
	spec.MemoryBytes = p.memory
	if p.layer != "" {
		spec.Template = &launcher.TemplateLayer{Dir: p.layer}
	}
	return spec
}

// resolveImage resolves an image name: local, local-root, a template's
// name (its layer), any of those with a size suffix
// (microvmsapi.SplitSizedName: the memory limit), or any other name, which
// runs the host's /usr as before templates (the AWS fake's engine names
// its images; the SDK refuses such a name on the local backend).
func (r *Registry) resolveImage(name string) (imagePlan, error) {
	plan, found, err := r.lookupImage(name)
	if err != nil {
		return plan, err
	}
	if !found {
		if base, mib, ok := microvmsapi.SplitSizedName(name); ok {
			if sized, found, err := r.lookupImage(base); err != nil {
				return plan, err
			} else if found {
				plan = sized
				plan.memory = int64(mib) << 20
			}
		}
	}
	if plan.base == localplatform.RootImage && !r.launcher.Privileged() {
		return plan, validationErr("The image " + localplatform.RootImage + " (root allowed) needs the root local platform: without root, rayd cannot run anything as root.")
	}
	if plan.layer != "" && !r.launcher.Privileged() {
		return plan, validationErr("The image " + name + " is a template: templates need the root local platform.")
	}
	if plan.memory != 0 && !r.launcher.Privileged() {
		return plan, validationErr("The image " + name + " names a size: sizes need the root local platform (cgroups).")
	}
	return plan, nil
}

// lookupImage resolves an exact name: found for local, local-root and a
// template with a layer; otherwise the name runs the host's /usr.
func (r *Registry) lookupImage(name string) (imagePlan, bool, error) {
	plan := imagePlan{base: name}
	if name == localplatform.Image || name == localplatform.RootImage {
		return plan, true, nil
	}
	if r.templates == nil || !ptemplate.ValidName(name) {
		return plan, false, nil
	}
	layer, err := r.templates.Layer(name)
	if errors.Is(err, ErrNoTemplate) {
		return plan, false, nil
	}
	if err != nil {
		return plan, false, err
	}
	plan.layer = layer
	return plan, true, nil
}
