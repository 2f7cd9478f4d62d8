package rayito

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/logging"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/proto/compat"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/proto/runpayload"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
	"github.com/rayito-dev/rayito/sdk/internal/backoff"
	"github.com/rayito-dev/rayito/sdk/internal/tokenstore"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// Sandbox is a running sandbox. It is safe for concurrent use.
type Sandbox struct {
	id          string
	endpoint    string
	accessToken string
	cfg         *config
	mv          *microvms.Client
	dp          *dataPlane
	// newerAgent makes the "newer agent" warning once per Sandbox.
	newerAgent sync.Once
	// gateways: the gateway routes and placeholders in force.
	gateways gatewayState
	// extMu guards cfg.exts, which extensions may add to (hook.Value).
	extMu sync.Mutex
	// ports: the ways into the sandbox's own ports (Port).
	portsMu sync.Mutex
	ports   map[int]*Port
	// leases: the sandbox's leases (lease.go).
	leases leaseSet

	// Commands runs and manages processes in the sandbox.
	Commands *Commands
	// Pty drives interactive terminals in the sandbox.
	Pty *Pty
	// Files reads and writes files in the sandbox.
	Files *Files
	// Code runs code in the sandbox's stateful interpreter (RunCode is a
	// shortcut for Code.Run).
	Code *Interpreter

	// createOpts are the options Create made it with (nil for Connect):
	// Reincarnate creates its successor with them.
	createOpts []Option
}

// ID is the sandbox id (the microVM id).
func (s *Sandbox) ID() string { return s.id }

// AccessToken is the sandbox's access token: with the id it lets
// Connect reach the sandbox again. Treat it as a secret.
func (s *Sandbox) AccessToken() string { return s.accessToken }

// controlPlane builds the control-plane client for cfg.
func controlPlane(ctx context.Context, cfg *config) (*microvms.Client, error) {
	var opts []microvms.Option
	if cfg.httpClient != nil {
		opts = append(opts, microvms.WithHTTPClient(cfg.httpClient))
	}
	switch cfg.backend {
	case BackendLocal:
		// The local platform throttles by itself (and 429s are retried);
		// the client-side buckets model the AWS quotas only.
		return microvms.New(cfg.endpoint, append(opts, microvms.Unsigned(), microvms.WithoutRateLimits())...)
	case BackendAWS:
		if cfg.awsConfig == nil {
			// The AWS SDK's own log lines (retries, deprecations) never
			// reach the user's terminal.
			awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithLogger(logging.Nop{}))
			if err != nil {
				return nil, newError(ReasonUnauthenticated, "cannot load the AWS configuration (credentials, profile)", err)
			}
			// The service's own endpoint variable wins over the global
			// AWS_ENDPOINT_URL (which LoadDefaultConfig reads), as for the
			// AWS SDK's generated clients.
			if ep := cfg.getenv("AWS_ENDPOINT_URL_LAMBDA"); ep != "" {
				awsCfg.BaseEndpoint = &ep
			}
			cfg.awsConfig = &awsCfg
		}
		awsCfg := cfg.awsConfig.Copy()
		awsCfg.Logger = logging.Nop{}
		awsCfg.ClientLogMode = 0
		if awsCfg.Region == "" {
			return nil, newError(ReasonInvalidArgument, "no AWS region is configured: set AWS_REGION or a region in your AWS profile")
		}
		mv, err := microvms.NewFromConfig(awsCfg, opts...)
		if err != nil {
			return nil, newError(ReasonInvalidArgument, "the AWS configuration cannot reach the sandbox platform (check the region)", err)
		}
		return mv, nil
	default:
		return nil, errBackend(cfg)
	}
}

// Create starts a sandbox and waits until it answers. The access token is
// made here; only its sha256 travels to the platform. It is kept in the
// token store shared with the rayito CLI (one 0600 file per sandbox under
// $XDG_STATE_HOME/rayito/tokens, else ~/.local/state/rayito/tokens), so
// that Connect works from another process; WithoutTokenStore keeps it
// out. A token leaves the store when its sandbox is killed, when any call
// learns from the platform that the sandbox ended (List, GetInfo, Info,
// Connect, Pause, Resume, a command's reconnect), and at the latest when
// Create finds it saved more than 9 hours ago (no sandbox lives past 8).
// Once the daemon is
// ready its version is checked against this SDK's (see checkAgent): an
// incompatible one is an *IncompatibleAgentError. If the sandbox does not
// become ready, or its daemon is incompatible, it is terminated, unless
// WithKeepOnFailure.
func Create(ctx context.Context, opts ...Option) (created *Sandbox, err error) {
	cfg := newConfig(opts)
	ctx, sp := startSpan(ctx, cfg, "Create", "")
	defer func() { sp.set(created.spanID(), cfg.template); sp.end(err) }()
	plan, err := planRun(cfg)
	if err != nil {
		return nil, err
	}
	template, err := createTemplate(ctx, cfg)
	if err != nil {
		return nil, err
	}
	run, err := createRunInput(cfg, plan)
	if err != nil {
		return nil, err
	}
	in, token, netPolicy, netRequired := run.in, run.token, run.netPolicy, run.netRequired
	// The configuration is loaded (no call yet: it names the region the
	// connectors are in), then everything that can be checked here is,
	// before any call.
	mv, err := controlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := planPlacement(cfg, in); err != nil {
		return nil, err
	}
	ident, name, err := resolveTemplate(ctx, cfg, mv, template)
	if err != nil {
		return nil, err
	}
	in.ImageIdentifier = ident
	if in.Logging.CloudWatch != nil {
		in.Logging.CloudWatch.LogGroup = "/rayito/" + name
	}
	vm, err := mv.RunMicrovm(ctx, in)
	if err != nil {
		return nil, controlPlaneErr(cfg, "", err)
	}
	if ended(vm.State) {
		// The local platform answers once the boot is over, failed or not.
		return nil, endedErr(cfg, vm)
	}
	s := newSandbox(cfg, mv, vm, token)
	s.createOpts = slices.Clone(opts)
	// The one place a sandbox Create will not hand out is killed: always
	// when it would run missing from the index, with its network open, or
	// without the secrets, events, metrics export or mounts asked for
	// (mustKill); otherwise unless WithKeepOnFailure.
	mustKill := false
	defer func() {
		if err != nil && (mustKill || !cfg.keepOnFailure) {
			_ = s.Kill(context.WithoutCancel(ctx))
		}
	}()
	if cfg.index != nil {
		// Not in the index (IndexTerminate): killed, keep-on-failure or
		// not.
		mustKill = true
		if err := s.writeIndex(ctx, vm, in.MaximumDurationInSeconds); err != nil {
			return nil, err
		}
		mustKill = false
	}
	if !cfg.noTokens {
		if err := cfg.tokens().Save(s.id, token); err != nil {
			return nil, newError(ReasonInternal, "sandbox "+s.id+": cannot store its access token", err)
		}
		cfg.sweepTokens()
	}
	ready, err := s.awaitReady(ctx)
	if err != nil {
		return nil, err
	}
	mustKill = true
	if netPolicy != nil {
		if err := s.checkRunNetwork(ctx, ready.GetRunNetwork(), netPolicy, netRequired); err != nil {
			return nil, err
		}
	}
	if err := s.createConfigure(ctx, cfg); err != nil {
		return nil, err
	}
	mustKill = false
	if cfg.persist != nil {
		// Its HOME comes back before anyone uses it; a sandbox whose
		// checkpoint cannot be restored is not handed out.
		if err := s.autoRestore(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func region(cfg *config) string {
	if cfg.awsConfig != nil && cfg.awsConfig.Region != "" {
		return cfg.awsConfig.Region
	}
	return "local"
}

// Health polling: the first retry comes after firstPoll (a local sandbox
// boots in tens of milliseconds; a microVM on AWS in seconds), doubling up
// to maxPoll.
const (
	firstPollLocal = 2 * time.Millisecond
	firstPollAWS   = 100 * time.Millisecond
	maxPoll        = 2 * time.Second
)

// waitReady polls Health (see firstPollLocal) until rayd answers ready
// with the sandbox's id, reading the control plane every 5 s: TERMINATING
// or TERMINATED is fatal. The ready answer's agent_version then goes
// through checkAgent.
func (s *Sandbox) waitReady(ctx context.Context) error {
	_, err := s.awaitReady(ctx)
	return err
}

// awaitReady is waitReady, returning rayd's ready answer.
func (s *Sandbox) awaitReady(ctx context.Context) (*raydv1.HealthResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.readyTimeout)
	defer cancel()
	poll := backoff.New(firstPollAWS, maxPoll)
	if s.cfg.backend == BackendLocal {
		poll = backoff.New(firstPollLocal, maxPoll)
	}
	lastGet := time.Now()
	for {
		hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := s.dp.health.Health(hctx, connect.NewRequest(&raydv1.HealthRequest{}))
		hcancel()
		if err == nil && resp.Msg.GetAgentReady() && resp.Msg.GetSandboxId() == s.id {
			return resp.Msg, s.checkAgent(resp.Msg.GetAgentVersion())
		}
		if time.Since(lastGet) >= 5*time.Second {
			lastGet = time.Now()
			vm, gerr := s.mv.GetMicrovm(ctx, s.id)
			if gerr == nil && ended(vm.State) {
				return nil, endedErr(s.cfg, vm)
			}
		}
		if err := poll.Wait(ctx); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return nil, newError(ReasonNotReady, fmt.Sprintf("sandbox %s did not become ready within %s", s.id, s.cfg.readyTimeout))
			}
			return nil, err
		}
	}
}

// maxAgentVersionLen caps the agent version an error or a log carries.
const maxAgentVersionLen = 128

// checkAgent compares the daemon's version (Health's agent_version) with
// Version through proto/compat's table:
//
//   - compatible: nothing happens;
//   - compatible but a newer minor than this SDK knows: one warning per
//     Sandbox through WithLogger's logger (discarded by default);
//   - anything else is an *IncompatibleAgentError (errors.Is
//     ErrIncompatibleAgent): an incompatible version, a version that does
//     not parse, and no version at all. Every rayd release reports its
//     version, so an empty one is not an old rayd but something else
//     answering, or a broken build; the SDK fails closed rather than guess.
func (s *Sandbox) checkAgent(agentVersion string) error {
	res, err := s.cfg.compat.Check(Version, agentVersion)
	if err != nil {
		if len(agentVersion) > maxAgentVersionLen {
			agentVersion = agentVersion[:maxAgentVersionLen]
		}
		return &IncompatibleAgentError{SDKVersion: Version, AgentVersion: agentVersion, Err: err}
	}
	if res == compat.CompatibleNewer {
		s.newerAgent.Do(func() {
			s.cfg.logger.Warn("rayito: the sandbox's agent is newer than this SDK knows; upgrade the SDK for its new features",
				"sandbox_id", s.id, "sdk_version", Version, "agent_version", agentVersion)
		})
	}
	return nil
}

// connectHealthTimeout bounds Connect's Health call.
const connectHealthTimeout = 5 * time.Second

// checkAgentOnConnect asks Health once and checks its agent_version. A
// daemon whose Health fails or does not answer in 5 s cannot be checked:
// that is not an error here, so that Info and Kill still work on a stuck sandbox, and its
// next RPC reports the trouble. A canceled ctx is returned.
func (s *Sandbox) checkAgentOnConnect(ctx context.Context) error {
	hctx, cancel := context.WithTimeout(ctx, connectHealthTimeout)
	resp, err := s.dp.health.Health(hctx, connect.NewRequest(&raydv1.HealthRequest{}))
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.cfg.logger.Debug("rayito: Health did not answer; the agent's version was not checked",
			"sandbox_id", s.id, "code", connect.CodeOf(err).String())
		return nil
	}
	if err := s.checkAgent(resp.Msg.GetAgentVersion()); err != nil {
		return err
	}
	if resp.Msg.GetFeatures().GetConfigure() {
		// The gateway routes and placeholders of the sandbox (Gateway,
		// Placeholder).
		sctx, cancel := context.WithTimeout(ctx, connectHealthTimeout)
		s.loadGateways(sctx)
		cancel()
	}
	return nil
}

// Connect reaches an existing sandbox by id. The access token comes from
// WithAccessToken, else from the token store (where Create, in this or
// any other process of the user, put it). It asks the sandbox's Health
// once and checks the daemon's version like Create: an incompatible
// daemon is an *IncompatibleAgentError (the sandbox is left running), a
// newer compatible one a warning. A daemon whose Health fails or does not
// answer within 5 s is not checked, and that is not an error. A paused
// (or pausing) sandbox is not asked, so that Connect never wakes it;
// Resume checks it.
//
// An unknown id is "sandbox X not found" (errors.Is ErrNotFound); an
// ended sandbox a *SandboxEndedError.
func Connect(ctx context.Context, id string, opts ...Option) (_ *Sandbox, err error) {
	cfg := newConfig(opts)
	ctx, sp := startSpan(ctx, cfg, "Connect", spanID(id))
	defer func() { sp.end(err) }()
	if !tokenstore.ValidID(id) {
		return nil, newError(ReasonInvalidArgument, fmt.Sprintf("invalid sandbox id %q", id))
	}
	if cfg.accessToken != "" {
		if _, err := accesstoken.Decode(cfg.accessToken); err != nil {
			return nil, newError(ReasonInvalidArgument, "sandbox "+id+": malformed access token")
		}
	}
	// The control plane next: an unknown or ended sandbox says so whether
	// or not a token is at hand.
	mv, err := controlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	vm, err := mv.GetMicrovm(ctx, id)
	if err != nil {
		return nil, controlPlaneErr(cfg, id, err)
	}
	if ended(vm.State) {
		return nil, endedErr(cfg, vm)
	}
	token := cfg.accessToken
	if token == "" && !cfg.noTokens {
		if token, err = cfg.tokens().Load(id); err != nil {
			if errors.Is(err, tokenstore.ErrNoToken) {
				return nil, newError(ReasonUnauthenticated, "sandbox "+id+": no access token is stored for it on this machine; pass its token", ErrNoAccessToken, err)
			}
			return nil, newError(ReasonInternal, "sandbox "+id+": cannot read its stored access token", err)
		}
	}
	if _, err := accesstoken.Decode(token); err != nil {
		return nil, newError(ReasonInvalidArgument, "sandbox "+id+": malformed access token")
	}
	s := newSandbox(cfg, mv, vm, token)
	if paused(vm.State) {
		return s, nil
	}
	if err := s.checkAgentOnConnect(ctx); err != nil {
		s.dp.close()
		return nil, err
	}
	return s, nil
}

func newSandbox(cfg *config, mv *microvms.Client, vm *microvmsapi.Microvm, token string) *Sandbox {
	s := &Sandbox{id: vm.MicrovmID, endpoint: vm.Endpoint, accessToken: token, cfg: cfg, mv: mv}
	s.dp = newDataPlane(cfg, mv, s.id, s.endpoint, token)
	s.Commands = &Commands{sbx: s}
	s.Pty = &Pty{sbx: s}
	s.Code = &Interpreter{sbx: s}
	s.Files = &Files{sbx: s}
	return s
}

func ended(st microvmsapi.State) bool {
	return st == microvmsapi.StateTerminating || st == microvmsapi.StateTerminated
}

func paused(st microvmsapi.State) bool {
	return st == microvmsapi.StateSuspending || st == microvmsapi.StateSuspended
}

// endedErr describes an ended microVM, and removes its token from the
// store (see sawEnded).
func endedErr(cfg *config, vm *microvmsapi.Microvm) error {
	cfg.sawEnded(vm.MicrovmID, vm.State)
	e := &SandboxEndedError{ID: vm.MicrovmID}
	e.Reason, e.Detail = parseEndReason(vm.StateReason)
	if vm.TerminatedAt != nil {
		e.EndedAt = *vm.TerminatedAt
	}
	return e
}

// Kill terminates the sandbox and removes its token from the store.
// Killing an ended sandbox is not an error.
func (s *Sandbox) Kill(ctx context.Context) (err error) {
	ctx, sp := s.span(ctx, "Kill")
	defer func() { sp.end(err) }()
	defer s.dp.close()
	if err := s.mv.TerminateMicrovm(ctx, s.id); err != nil {
		return controlPlaneErr(s.cfg, s.id, err)
	}
	s.cfg.forget(s.id)
	return nil
}

// Kill terminates the sandbox with the given id and removes its token
// from the store. An unknown id is "sandbox X not found" (errors.Is
// ErrNotFound); its stored token, if any, is kept: the store is shared by
// every platform (local ones at other endpoints, AWS), and a sandbox of
// that id may live on another. Create sweeps it once no sandbox can be
// that old (see sweepTokens).
func Kill(ctx context.Context, id string, opts ...Option) (err error) {
	cfg := newConfig(opts)
	ctx, sp := startSpan(ctx, cfg, "Kill", spanID(id))
	defer func() { sp.end(err) }()
	if !tokenstore.ValidID(id) {
		return newError(ReasonInvalidArgument, fmt.Sprintf("invalid sandbox id %q", id))
	}
	mv, err := controlPlane(ctx, cfg)
	if err != nil {
		return err
	}
	if err := mv.TerminateMicrovm(ctx, id); err != nil {
		return controlPlaneErr(cfg, id, err)
	}
	cfg.forget(id)
	return nil
}

// tokens is the token store of cfg.
func (c *config) tokens() tokenstore.Store {
	dir := c.tokenDir
	if dir == "" {
		d, err := tokenstore.DefaultDir(c.getenv)
		if err != nil {
			return tokenstore.Store{}
		}
		dir = d
	}
	return tokenstore.Store{Dir: dir}
}

// forget removes id's token, unless the store is off.
func (c *config) forget(id string) {
	if !c.noTokens {
		_ = c.tokens().Remove(id)
	}
}

// sawEnded removes id's token when the platform says the sandbox ended
// (TERMINATING or TERMINATED: it can never run again). Sandbox ids are
// UUIDs, so a platform that reports id ended is the one that ran it; a
// sandbox the platform does not know is another matter (see Kill).
func (c *config) sawEnded(id string, st microvmsapi.State) {
	if ended(st) {
		c.forget(id)
	}
}

// tokenMaxAge is how long after it was saved a token may still serve a
// live sandbox: the longest a sandbox lives (the platform's maximum
// duration, 8 hours, running and paused time, on AWS and locally alike;
// the token is saved after the sandbox started), plus a margin for clock
// adjustments.
const tokenMaxAge = maxLifetime + time.Hour

// validToken reports whether a stored value is an access token.
func validToken(tok string) bool {
	_, err := accesstoken.Decode(tok)
	return err == nil
}

// sweepTokens removes the tokens of sandboxes that cannot be alive any
// more, whichever way they ended (a deadline, their maximum duration, out
// of memory, idle, a platform shut down) and whichever platform ran them:
// those saved longer ago than tokenMaxAge. Create calls it, so a store
// stays as small as the sandboxes of the last 9 hours. Errors are ignored:
// it is housekeeping.
func (c *config) sweepTokens() {
	if c.noTokens {
		return
	}
	if st := c.tokens(); st.Dir != "" {
		_, _ = st.Sweep(time.Now(), tokenMaxAge, validToken)
	}
}

// Info describes a sandbox.
type Info struct {
	ID        string
	State     string
	Template  string
	StartedAt time.Time
	// ExpiresAt is when the platform ends the sandbox at the latest (its
	// start plus its maximum duration, WithTimeout); zero when unknown.
	ExpiresAt time.Time
	EndedAt   time.Time
	// EndReason is why an ended (TERMINATING or TERMINATED) sandbox ended,
	// "" while it has not; EndDetail what the platform added ("exit status
	// 3"; for EndUnknown its own words). StateReason is the platform's
	// text as it gave it.
	EndReason   EndReason
	EndDetail   string
	StateReason string
	// Lifecycle is the sandbox's deadline as its daemon reports it while it
	// runs; nil when it is not running, or its daemon does not say.
	Lifecycle    *Lifecycle
	Metadata     map[string]string
	AgentVersion string
	// CPUCount and MemoryBytes describe the machine the sandbox's daemon
	// sees: on the local platform, the host.
	CPUCount    int
	MemoryBytes uint64
	// MemoryLimit and ProcessLimit are the sandbox's own limits as the
	// platform set them (its cgroup on the local platform); 0 when none
	// is known (an AWS microVM's size is its template's).
	MemoryLimit  uint64
	ProcessLimit int
	// Isolation is how the local platform isolates the sandbox, as its
	// daemon reports it while it runs: IsolationFull, IsolationRootless or
	// IsolationNone; "" when nothing is reported (an AWS microVM, an older
	// platform, or a sandbox that is not running).
	Isolation string
	// Isolated is false only when the sandbox is known NOT to be isolated
	// (Isolation == IsolationNone: a plain process of the platform's
	// user, with that user's access to the machine).
	Isolated bool
	// RootAllowed is true when its daemon lets clients run as root (and
	// its users have sudo): its image has RAYITO_ALLOW_ROOT=1, as the
	// local platform's LocalRootTemplate does. Reported while it runs.
	RootAllowed bool
}

// Isolation values (Info.Isolation). See docs/features.md, "localvm without
// root", for what each one isolates.
const (
	IsolationFull     = "full"     // root: namespaces, own uid range, cgroup limits, network policy
	IsolationRootless = "rootless" // unprivileged user namespaces: see docs/features.md
	IsolationNone     = "none"     // NOT isolated: the platform was opted in (--unisolated)
)

func isolationOf(h *raydv1.HealthResponse) string {
	switch h.GetIsolation() {
	case raydv1.Isolation_ISOLATION_FULL:
		return IsolationFull
	case raydv1.Isolation_ISOLATION_ROOTLESS:
		return IsolationRootless
	case raydv1.Isolation_ISOLATION_NONE:
		return IsolationNone
	}
	return ""
}

// Isolation asks the sandbox's daemon how it is isolated (see
// Info.Isolation): "" when it does not say.
func (s *Sandbox) Isolation(ctx context.Context) (string, error) {
	h, err := s.dp.health.Health(ctx, connect.NewRequest(&raydv1.HealthRequest{}))
	if err != nil {
		return "", rpcErr("health", err)
	}
	return isolationOf(h.Msg), nil
}

// Isolated reports whether the sandbox is isolated: false when its daemon
// says it is NOT (a local platform opted in to unisolated sandboxes).
func (s *Sandbox) Isolated(ctx context.Context) (bool, error) {
	v, err := s.Isolation(ctx)
	return v != IsolationNone, err
}

// Info returns the sandbox's state, and its metadata and daemon facts
// while it runs.
func (s *Sandbox) Info(ctx context.Context) (*Info, error) {
	vm, err := s.mv.GetMicrovm(ctx, s.id)
	if err != nil {
		return nil, controlPlaneErr(s.cfg, s.id, err)
	}
	s.cfg.sawEnded(vm.MicrovmID, vm.State)
	info := infoOf(vm)
	if vm.State == microvmsapi.StateRunning {
		if h, err := s.dp.health.Health(ctx, connect.NewRequest(&raydv1.HealthRequest{})); err == nil {
			info.Metadata = maps.Clone(h.Msg.GetMetadata())
			info.AgentVersion = h.Msg.GetAgentVersion()
			info.CPUCount = int(h.Msg.GetCpuCount())
			info.MemoryBytes = h.Msg.GetMemoryTotalBytes()
			info.MemoryLimit = h.Msg.GetLimits().GetMemoryBytes()
			info.ProcessLimit = int(h.Msg.GetLimits().GetProcesses())
			info.Isolation = isolationOf(h.Msg)
			info.Isolated = info.Isolation != IsolationNone
			info.RootAllowed = h.Msg.GetRootAllowed()
			info.Lifecycle = lifecycleOf(h.Msg.GetLifecycle())
		}
	}
	return info, nil
}

func infoOf(vm *microvmsapi.Microvm) *Info {
	info := &Info{ID: vm.MicrovmID, State: string(vm.State), Template: vm.ImageArn, StateReason: vm.StateReason, Isolated: true}
	if vm.StartedAt != nil {
		info.StartedAt = *vm.StartedAt
		if vm.MaximumDurationInSeconds > 0 {
			info.ExpiresAt = vm.StartedAt.Add(time.Duration(vm.MaximumDurationInSeconds) * time.Second)
		}
	}
	if vm.TerminatedAt != nil {
		info.EndedAt = *vm.TerminatedAt
	}
	if ended(vm.State) {
		info.EndReason, info.EndDetail = parseEndReason(vm.StateReason)
	}
	return info
}

// GetInfo describes the sandbox with the given id as the platform knows it
// (state, template, start, end and end reason), without an access token
// and without reaching the sandbox itself (no Metadata, AgentVersion,
// Lifecycle or Isolation): it works on paused and ended sandboxes alike
// and never wakes one. An unknown id is "sandbox X not found" (errors.Is
// ErrNotFound).
func GetInfo(ctx context.Context, id string, opts ...Option) (*Info, error) {
	cfg, _, vm, err := lookup(ctx, id, opts)
	if err != nil {
		return nil, err
	}
	cfg.sawEnded(vm.MicrovmID, vm.State)
	return infoOf(vm), nil
}

// lookup validates id and asks the control plane for it: no token, and
// the sandbox itself is not reached.
func lookup(ctx context.Context, id string, opts []Option) (*config, *microvms.Client, *microvmsapi.Microvm, error) {
	cfg := newConfig(opts)
	if !tokenstore.ValidID(id) {
		return nil, nil, nil, newError(ReasonInvalidArgument, fmt.Sprintf("invalid sandbox id %q", id))
	}
	mv, err := controlPlane(ctx, cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	vm, err := mv.GetMicrovm(ctx, id)
	if err != nil {
		return nil, nil, nil, controlPlaneErr(cfg, id, err)
	}
	return cfg, mv, vm, nil
}

// List lists sandboxes, newest first, keeping those WithStates and
// WithMetadataFilter ask for. The platform's listing has no end reasons:
// WithEndReasons reads them (EndReason, EndDetail, EndedAt), one call per
// ended sandbox.
// With WithIndex, each page of the platform's listing is matched with the
// metadata index's rows (one BatchGetItem a page; see DynamoDbIndex): a
// row counts only for a listed sandbox of the same image and start, the
// state always comes from the listing, and Info.Metadata comes from it.
func List(ctx context.Context, opts ...Option) ([]Info, error) {
	cfg := newConfig(opts)
	mv, err := controlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var out []Info
	for item, err := range listItems(ctx, cfg, mv) {
		if err != nil {
			return nil, controlPlaneErr(cfg, "", err)
		}
		cfg.sawEnded(item.MicrovmID, item.State)
		if cfg.states != nil && !cfg.states[string(item.State)] {
			continue
		}
		info := Info{ID: item.MicrovmID, State: string(item.State), Template: item.ImageArn, Isolated: true}
		if item.StartedAt != nil {
			info.StartedAt = *item.StartedAt
		}
		if cfg.endReasons && ended(item.State) {
			if vm, err := mv.GetMicrovm(ctx, item.MicrovmID); err == nil {
				full := infoOf(vm)
				info.EndReason, info.EndDetail, info.StateReason, info.EndedAt = full.EndReason, full.EndDetail, full.StateReason, full.EndedAt
			} else if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
		if item.indexed {
			// A verified index row answers, paused sandboxes included.
			if !matches(item.metadata, cfg.metadataFilter) {
				continue
			}
			info.Metadata = item.metadata
		} else if len(cfg.metadataFilter) > 0 {
			md, ok := metadataOf(ctx, cfg, mv, item.MicrovmID, item.State)
			if !ok || !matches(md, cfg.metadataFilter) {
				continue
			}
			info.Metadata = md
		}
		out = append(out, info)
	}
	return out, nil
}

// metadataOf reads a running sandbox's metadata through its anonymous
// Health RPC.
func metadataOf(ctx context.Context, cfg *config, mv *microvms.Client, id string, state microvmsapi.State) (map[string]string, bool) {
	if state != microvmsapi.StateRunning {
		return nil, false
	}
	vm, err := mv.GetMicrovm(ctx, id)
	if err != nil || vm.Endpoint == "" {
		return nil, false
	}
	dp := newDataPlane(cfg, mv, id, vm.Endpoint, "")
	defer dp.close()
	h, err := dp.health.Health(ctx, connect.NewRequest(&raydv1.HealthRequest{}))
	if err != nil {
		return nil, false
	}
	return h.Msg.GetMetadata(), true
}

func matches(md, want map[string]string) bool {
	for k, v := range want {
		if got, ok := md[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// createTemplate checks Create's options that need no call but the local
// template lookup, and returns the template to run.
func createTemplate(ctx context.Context, cfg *config) (string, error) {
	if err := cfg.checkExtensions(); err != nil {
		return "", err
	}
	if err := cfg.checkIndex(); err != nil {
		return "", err
	}
	if cfg.telemetry != nil {
		if _, err := telemetrySection(cfg.telemetry); err != nil {
			return "", err
		}
	}
	if cfg.mounts != nil {
		if _, err := mountList(cfg.mounts); err != nil {
			return "", err
		}
	}
	template := cfg.template
	if template == "" {
		if cfg.backend == BackendAWS {
			return "", newError(ReasonInvalidArgument, "the aws backend needs a template (an image ARN or name, e.g. from RAYITO_TEMPLATE)")
		}
		template = LocalTemplate
	}
	if cfg.backend == BackendLocal && template != LocalTemplate && template != LocalRootTemplate && !ptemplate.ValidName(template) {
		// The local platform has its two images and the templates built
		// on it (BuildTemplate), each named like this.
		return "", newError(ReasonInvalidArgument, fmt.Sprintf("the local platform has %q, %q (root allowed) and the templates built on it: %q cannot name one", LocalTemplate, LocalRootTemplate, template))
	}
	if cfg.backend == BackendLocal && template != LocalTemplate && template != LocalRootTemplate {
		if err := checkLocalTemplate(ctx, cfg, template); err != nil {
			return "", err
		}
	}
	if cfg.sizeMiB != 0 {
		return sizedTemplate(cfg, template)
	}
	return template, nil
}

// createRun is Create's RunMicrovm request and what it was made of.
type createRun struct {
	in          *microvmsapi.RunMicrovmInput
	token       string
	netPolicy   *NetworkPolicy
	netRequired bool
}

// createRunInput makes the access token and the run payload (network
// policy, persistence, lifecycle) of Create's RunMicrovm.
func createRunInput(cfg *config, plan runPlan) (createRun, error) {
	token, err := accesstoken.New()
	if err != nil {
		return createRun{}, err
	}
	digest, _ := accesstoken.Digest(token)
	netPolicy, netRequired, err := networkPlan(cfg)
	if err != nil {
		return createRun{}, err
	}
	persist, err := persistPlan(cfg)
	if err != nil {
		return createRun{}, err
	}
	payload, err := runpayload.Encode(&runpayload.Payload{
		V: 1, TokenSHA256: digest,
		Envs: cfg.envs, Metadata: cfg.metadata, User: cfg.user, Workdir: cfg.workdir,
		Lifecycle: plan.lifecycle, Network: payloadNetwork(netPolicy), Persist: persist,
	})
	if err != nil {
		return createRun{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	in := &microvmsapi.RunMicrovmInput{
		RunHookPayload:           payload,
		MaximumDurationInSeconds: plan.maxDuration,
		IdlePolicy:               plan.idle,
	}
	return createRun{in: in, token: token, netPolicy: netPolicy, netRequired: netRequired}, nil
}
