package rayito

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/proto/compat"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/proto/runpayload"
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

	// Commands runs and manages processes in the sandbox.
	Commands *Commands
	// Pty drives interactive terminals in the sandbox.
	Pty *Pty
	// Files reads and writes files in the sandbox.
	Files *Files
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
			awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
			if err != nil {
				return nil, fmt.Errorf("rayito: load AWS configuration: %w", err)
			}
			cfg.awsConfig = &awsCfg
		}
		return microvms.NewFromConfig(*cfg.awsConfig, opts...)
	default:
		return nil, fmt.Errorf("%w: unknown backend %q (want local or aws)", ErrInvalidArgument, cfg.backend)
	}
}

// Create starts a sandbox and waits until it answers. The access token is
// made here; only its sha256 travels to the platform. Once the daemon is
// ready its version is checked against this SDK's (see checkAgent): an
// incompatible one is an *IncompatibleAgentError. If the sandbox does not
// become ready, or its daemon is incompatible, it is terminated, unless
// WithKeepOnFailure.
func Create(ctx context.Context, opts ...Option) (*Sandbox, error) {
	cfg := newConfig(opts)
	if cfg.timeout < time.Second || cfg.timeout > microvmsapi.MaxDurationSeconds*time.Second {
		return nil, fmt.Errorf("%w: timeout must be between 1s and 8h", ErrInvalidArgument)
	}
	template := cfg.template
	if template == "" {
		if cfg.backend == BackendAWS {
			return nil, fmt.Errorf("%w: the AWS backend needs a template (WithTemplate or RAYITO_TEMPLATE)", ErrInvalidArgument)
		}
		template = "local"
	}
	token, err := accesstoken.New()
	if err != nil {
		return nil, err
	}
	digest, _ := accesstoken.Digest(token)
	payload, err := runpayload.Encode(&runpayload.Payload{
		V: 1, TokenSHA256: digest,
		Envs: cfg.envs, Metadata: cfg.metadata, User: cfg.user, Workdir: cfg.workdir,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	mv, err := controlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	in := &microvmsapi.RunMicrovmInput{
		ImageIdentifier:          template,
		RunHookPayload:           payload,
		MaximumDurationInSeconds: int(cfg.timeout / time.Second),
	}
	if cfg.backend == BackendAWS {
		in.Logging = &microvmsapi.Logging{Disabled: &struct{}{}}
	}
	if cfg.internet {
		in.EgressNetworkConnectors = []string{microvmsapi.ConnectorARN(region(cfg), microvmsapi.ConnectorInternet)}
	}
	vm, err := mv.RunMicrovm(ctx, in)
	if err != nil {
		return nil, err
	}
	if vm.State == microvmsapi.StateTerminating || vm.State == microvmsapi.StateTerminated {
		// The local platform answers once the boot is over, failed or not.
		reason := vm.StateReason
		if len(reason) > 240 {
			reason = reason[:240]
		}
		return nil, fmt.Errorf("%w: the sandbox ended while starting: %q", ErrSandboxEnded, reason)
	}
	s := &Sandbox{id: vm.MicrovmID, endpoint: vm.Endpoint, accessToken: token, cfg: cfg, mv: mv}
	s.dp = newDataPlane(cfg, mv, s.id, s.endpoint, token)
	s.Commands = &Commands{sbx: s}
	s.Pty = &Pty{sbx: s}
	s.Files = &Files{sbx: s}
	if err := s.waitReady(ctx); err != nil {
		if !cfg.keepOnFailure {
			_ = s.Kill(context.WithoutCancel(ctx))
		}
		return nil, err
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
	ctx, cancel := context.WithTimeout(ctx, s.cfg.readyTimeout)
	defer cancel()
	delay := firstPollAWS
	if s.cfg.backend == BackendLocal {
		delay = firstPollLocal
	}
	lastGet := time.Now()
	for {
		hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := s.dp.health.Health(hctx, connect.NewRequest(&raydv1.HealthRequest{}))
		hcancel()
		if err == nil && resp.Msg.GetAgentReady() && resp.Msg.GetSandboxId() == s.id {
			return s.checkAgent(resp.Msg.GetAgentVersion())
		}
		if time.Since(lastGet) >= 5*time.Second {
			lastGet = time.Now()
			vm, gerr := s.mv.GetMicrovm(ctx, s.id)
			if gerr == nil && (vm.State == microvmsapi.StateTerminating || vm.State == microvmsapi.StateTerminated) {
				return fmt.Errorf("%w: the sandbox ended while starting", ErrSandboxEnded)
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%w after %s", ErrNotReady, s.cfg.readyTimeout)
			}
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, maxPoll)
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
	return s.checkAgent(resp.Msg.GetAgentVersion())
}

// Connect reaches an existing sandbox by id and access token. It asks the
// sandbox's Health once and checks the daemon's version like Create: an
// incompatible daemon is an *IncompatibleAgentError (the sandbox is left
// running), a newer compatible one a warning. A daemon whose Health fails
// or does not answer within 5 s is not checked, and that is not an error.
func Connect(ctx context.Context, id, accessToken string, opts ...Option) (*Sandbox, error) {
	if _, err := accesstoken.Decode(accessToken); err != nil {
		return nil, fmt.Errorf("%w: malformed access token", ErrInvalidArgument)
	}
	cfg := newConfig(opts)
	mv, err := controlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	vm, err := mv.GetMicrovm(ctx, id)
	if err != nil {
		return nil, err
	}
	if vm.State == microvmsapi.StateTerminating || vm.State == microvmsapi.StateTerminated {
		return nil, fmt.Errorf("%w: %s", ErrSandboxEnded, strings.ToLower(string(vm.State)))
	}
	s := &Sandbox{id: vm.MicrovmID, endpoint: vm.Endpoint, accessToken: accessToken, cfg: cfg, mv: mv}
	s.dp = newDataPlane(cfg, mv, s.id, s.endpoint, accessToken)
	s.Commands = &Commands{sbx: s}
	s.Pty = &Pty{sbx: s}
	s.Files = &Files{sbx: s}
	if err := s.checkAgentOnConnect(ctx); err != nil {
		s.dp.close()
		return nil, err
	}
	return s, nil
}

// Kill terminates the sandbox. Killing an ended sandbox is not an error.
func (s *Sandbox) Kill(ctx context.Context) error {
	defer s.dp.close()
	return s.mv.TerminateMicrovm(ctx, s.id)
}

// Kill terminates the sandbox with the given id.
func Kill(ctx context.Context, id string, opts ...Option) error {
	mv, err := controlPlane(ctx, newConfig(opts))
	if err != nil {
		return err
	}
	return mv.TerminateMicrovm(ctx, id)
}

// Info describes a sandbox.
type Info struct {
	ID           string
	State        string
	Template     string
	StartedAt    time.Time
	EndedAt      time.Time
	StateReason  string
	Metadata     map[string]string
	AgentVersion string
	CPUCount     int
	MemoryBytes  uint64
}

// Info returns the sandbox's state, and its metadata and daemon facts
// while it runs.
func (s *Sandbox) Info(ctx context.Context) (*Info, error) {
	vm, err := s.mv.GetMicrovm(ctx, s.id)
	if err != nil {
		return nil, err
	}
	info := infoOf(vm)
	if vm.State == microvmsapi.StateRunning {
		if h, err := s.dp.health.Health(ctx, connect.NewRequest(&raydv1.HealthRequest{})); err == nil {
			info.Metadata = maps.Clone(h.Msg.GetMetadata())
			info.AgentVersion = h.Msg.GetAgentVersion()
			info.CPUCount = int(h.Msg.GetCpuCount())
			info.MemoryBytes = h.Msg.GetMemoryTotalBytes()
		}
	}
	return info, nil
}

func infoOf(vm *microvmsapi.Microvm) *Info {
	info := &Info{ID: vm.MicrovmID, State: string(vm.State), Template: vm.ImageArn, StateReason: vm.StateReason}
	if vm.StartedAt != nil {
		info.StartedAt = *vm.StartedAt
	}
	if vm.TerminatedAt != nil {
		info.EndedAt = *vm.TerminatedAt
	}
	return info
}

// ListOption filters List.
type ListOption func(*listConfig)

type listConfig struct {
	states   map[string]bool
	metadata map[string]string
}

// WithStates keeps sandboxes in the given states (e.g. "RUNNING").
func WithStates(states ...string) ListOption {
	return func(c *listConfig) {
		c.states = map[string]bool{}
		for _, s := range states {
			c.states[strings.ToUpper(s)] = true
		}
	}
}

// WithMetadataFilter keeps running sandboxes whose metadata has every
// given key with the given value (read through each sandbox's Health).
func WithMetadataFilter(md map[string]string) ListOption {
	return func(c *listConfig) { c.metadata = md }
}

// List lists sandboxes, newest first.
func List(ctx context.Context, filter []ListOption, opts ...Option) ([]Info, error) {
	cfg := newConfig(opts)
	lc := &listConfig{}
	for _, f := range filter {
		f(lc)
	}
	mv, err := controlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var out []Info
	for item, err := range mv.ListAll(ctx, microvms.ListInput{}) {
		if err != nil {
			return nil, err
		}
		if lc.states != nil && !lc.states[string(item.State)] {
			continue
		}
		info := Info{ID: item.MicrovmID, State: string(item.State), Template: item.ImageArn}
		if item.StartedAt != nil {
			info.StartedAt = *item.StartedAt
		}
		if len(lc.metadata) > 0 {
			md, ok := metadataOf(ctx, cfg, mv, item.MicrovmID, item.State)
			if !ok || !matches(md, lc.metadata) {
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
