package e2b

import (
	"context"
	"errors"
	"maps"
	"strings"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/git"
)

// E2B's defaults.
const (
	// DefaultTemplate is E2B's default template; it maps to Rayito's
	// default image (RAYITO_TEMPLATE, or the local platform's).
	DefaultTemplate = "base"
	// DefaultTimeout is E2B's default sandbox timeout.
	DefaultTimeout = 300 * time.Second
	// maxLifetime bounds how far SetTimeout can move the deadline: the
	// longest a Rayito sandbox lives (8 h).
	maxLifetime = 8 * time.Hour
)

// defaultTemplates are E2B's own template ids that stand for "the
// default image" here.
var defaultTemplates = map[string]bool{DefaultTemplate: true, "code-interpreter-v1": true}

type options struct {
	template   string
	timeout    time.Duration
	metadata   map[string]string
	envs       map[string]string
	internet   *bool
	network    *NetworkOpts
	autoPause  bool
	autoResume bool
	insecure   bool
	rayito     []rayito.Option
}

// Option configures Create, Connect, List and Kill.
type Option func(*options)

// WithTemplate sets E2B's templateID: "base" (the default) and
// "code-interpreter-v1" are Rayito's default image, anything else is
// passed on as a Rayito template (an image name or ARN on AWS).
func WithTemplate(id string) Option { return func(o *options) { o.template = id } }

// WithTimeout sets the sandbox's timeout (E2B's timeoutMs; default 300 s).
// SetTimeout moves it, up to 8 h from the start.
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithMetadata sets the sandbox's metadata.
func WithMetadata(md map[string]string) Option {
	return func(o *options) { o.metadata = maps.Clone(md) }
}

// WithEnvs sets environment variables for every command (they travel in
// the creation payload: never secrets).
func WithEnvs(envs map[string]string) Option { return func(o *options) { o.envs = maps.Clone(envs) } }

// WithAllowInternetAccess is E2B's allowInternetAccess (default true).
func WithAllowInternetAccess(allow bool) Option { return func(o *options) { o.internet = &allow } }

// NetworkOpts is E2B's network option: outbound allow and deny lists (IP
// addresses, CIDRs, host names; "0.0.0.0/0" in DenyOut denies everything
// AllowOut does not name).
type NetworkOpts struct {
	AllowOut []string
	DenyOut  []string
}

// WithNetwork is E2B's network option.
func WithNetwork(n NetworkOpts) Option { return func(o *options) { o.network = &n } }

// WithAutoPause pauses the sandbox at its timeout instead of killing it
// (E2B's lifecycle onTimeout: "pause").
func WithAutoPause() Option { return func(o *options) { o.autoPause = true } }

// WithAutoResume resumes a paused sandbox on a request (E2B's
// autoResume; with WithAutoPause).
func WithAutoResume() Option { return func(o *options) { o.autoResume = true } }

// WithSecure(false) is E2B's secure: false. Rayito sandboxes always
// require their access token, so Create refuses it with an
// *UnimplementedError; WithSecure(true) is the default and changes
// nothing.
func WithSecure(secure bool) Option { return func(o *options) { o.insecure = !secure } }

// WithRayitoOptions passes options of package rayito (the backend, the
// endpoint, the AWS configuration, secrets, ...) to every call.
func WithRayitoOptions(opts ...rayito.Option) Option {
	return func(o *options) { o.rayito = append(o.rayito, opts...) }
}

func newOptions(opts []Option) *options {
	o := &options{timeout: DefaultTimeout}
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

// Sandbox is E2B's Sandbox over a Rayito sandbox, which Rayito returns for
// everything this package does not cover.
type Sandbox struct {
	sbx  *rayito.Sandbox
	opts *options

	// Commands runs processes (E2B's sandbox.commands).
	Commands *Commands
	// Files reads and writes files (E2B's sandbox.files).
	Files *Filesystem
	// Git runs git (E2B's sandbox.git): Rayito's own, whose credentials
	// are never written to the repository (see sdk/git).
	Git *git.Client
}

func newSandbox(s *rayito.Sandbox, o *options) *Sandbox {
	return &Sandbox{sbx: s, opts: o, Commands: &Commands{sbx: s}, Files: &Filesystem{sbx: s}, Git: git.New(s)}
}

// Create starts a sandbox (E2B's Sandbox.create) and returns once it
// answers.
func Create(ctx context.Context, opts ...Option) (*Sandbox, error) {
	o := newOptions(opts)
	if o.insecure {
		return nil, unimplemented("secure: false", "a Rayito sandbox always requires its access token (Sandbox.AccessToken)")
	}
	ropts := append([]rayito.Option{}, o.rayito...)
	if o.template != "" && !defaultTemplates[o.template] {
		ropts = append(ropts, rayito.WithTemplate(o.template))
	}
	// A managed lifecycle, so that SetTimeout can move the deadline as
	// E2B's does (up to 8 h from the start).
	action := rayito.TimeoutKill
	if o.autoPause {
		action = rayito.TimeoutPause
	}
	ropts = append(ropts, rayito.WithTimeout(o.timeout), rayito.WithOnTimeout(action), rayito.WithMaxLifetime(maxLifetime),
		rayito.WithMetadata(o.metadata), rayito.WithEnvs(o.envs))
	if o.autoResume {
		ropts = append(ropts, rayito.WithAutoResume())
	}
	if o.internet != nil && !*o.internet && o.network == nil {
		ropts = append(ropts, rayito.WithAllowInternetAccess(false))
	}
	if o.network != nil {
		p := rayito.NetworkPolicy{AllowOut: o.network.AllowOut, DenyOut: o.network.DenyOut}
		if o.internet != nil && !*o.internet {
			p.DenyOut = append(p.DenyOut, rayito.DenyAllNetwork().DenyOut...)
		}
		ropts = append(ropts, rayito.WithNetwork(p))
	}
	s, err := rayito.Create(ctx, ropts...)
	if err != nil {
		return nil, wrap(err)
	}
	return newSandbox(s, o), nil
}

// Connect reaches a running or paused sandbox by id (E2B's
// Sandbox.connect): a paused one is resumed, as E2B's connect does. The
// access token comes from rayito's token store, or WithRayitoOptions(
// rayito.WithAccessToken(...)).
func Connect(ctx context.Context, sandboxID string, opts ...Option) (*Sandbox, error) {
	o := newOptions(opts)
	info, err := rayito.GetInfo(ctx, sandboxID, o.rayito...)
	if err != nil {
		return nil, wrap(err)
	}
	if info.State == "SUSPENDED" || info.State == "SUSPENDING" {
		if err := rayito.Resume(ctx, sandboxID, o.rayito...); err != nil {
			return nil, wrap(err)
		}
	}
	s, err := rayito.Connect(ctx, sandboxID, o.rayito...)
	if err != nil {
		return nil, wrap(err)
	}
	return newSandbox(s, o), nil
}

// SandboxInfo is E2B's SandboxInfo.
type SandboxInfo struct {
	SandboxID  string
	TemplateID string
	Metadata   map[string]string
	// State is "running" or "paused" (E2B's states); "ended" once the
	// sandbox has ended, which E2B does not list.
	State     string
	StartedAt time.Time
	EndAt     time.Time
}

func infoOf(i *rayito.Info) SandboxInfo {
	out := SandboxInfo{SandboxID: i.ID, TemplateID: i.Template, Metadata: i.Metadata, State: stateOf(i.State), StartedAt: i.StartedAt, EndAt: i.ExpiresAt}
	if !i.EndedAt.IsZero() {
		out.EndAt = i.EndedAt
	}
	return out
}

func stateOf(s string) string {
	switch s {
	case "PENDING", "RUNNING":
		return "running"
	case "SUSPENDING", "SUSPENDED":
		return "paused"
	}
	return "ended"
}

// List returns the running and paused sandboxes (E2B's Sandbox.list);
// WithListState and WithListMetadata filter them.
func List(ctx context.Context, opts ...ListOption) ([]SandboxInfo, error) {
	var lo listOptions
	for _, f := range opts {
		f(&lo)
	}
	ropts := append([]rayito.Option{}, lo.rayito...)
	states := []string{"PENDING", "RUNNING", "SUSPENDING", "SUSPENDED"}
	if len(lo.states) > 0 {
		states = nil
		for _, s := range lo.states {
			switch strings.ToLower(s) {
			case "running":
				states = append(states, "PENDING", "RUNNING")
			case "paused":
				states = append(states, "SUSPENDING", "SUSPENDED")
			default:
				return nil, errors.Join(ErrInvalidArgument, errors.New("e2b: a state filter is running or paused"))
			}
		}
	}
	ropts = append(ropts, rayito.WithStates(states...))
	if lo.metadata != nil {
		ropts = append(ropts, rayito.WithMetadataFilter(lo.metadata))
	}
	infos, err := rayito.List(ctx, ropts...)
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]SandboxInfo, 0, len(infos))
	for i := range infos {
		out = append(out, infoOf(&infos[i]))
	}
	return out, nil
}

type listOptions struct {
	states   []string
	metadata map[string]string
	rayito   []rayito.Option
}

// ListOption configures List.
type ListOption func(*listOptions)

// WithListState keeps sandboxes in these states: "running", "paused".
func WithListState(states ...string) ListOption {
	return func(o *listOptions) { o.states = append(o.states, states...) }
}

// WithListMetadata keeps sandboxes whose metadata has every given pair.
func WithListMetadata(md map[string]string) ListOption {
	return func(o *listOptions) { o.metadata = maps.Clone(md) }
}

// WithListRayitoOptions passes rayito options to List.
func WithListRayitoOptions(opts ...rayito.Option) ListOption {
	return func(o *listOptions) { o.rayito = append(o.rayito, opts...) }
}

// Kill ends a sandbox by id (E2B's Sandbox.kill): false when it does not
// exist or has ended already.
func Kill(ctx context.Context, sandboxID string, opts ...Option) (bool, error) {
	o := newOptions(opts)
	return kill(ctx, sandboxID, o.rayito, func() error { return rayito.Kill(ctx, sandboxID, o.rayito...) })
}

// kill reads the sandbox's state first: the platform's terminate succeeds
// on an ended sandbox too, where E2B answers false.
func kill(ctx context.Context, id string, ropts []rayito.Option, do func() error) (bool, error) {
	i, err := rayito.GetInfo(ctx, id, ropts...)
	if errors.Is(err, rayito.ErrNotFound) || err == nil && stateOf(i.State) == "ended" {
		return false, nil
	}
	if err != nil {
		return false, wrap(err)
	}
	err = do()
	if errors.Is(err, rayito.ErrNotFound) || errors.Is(err, rayito.ErrSandboxEnded) {
		return false, nil
	}
	return err == nil, wrap(err)
}

// SandboxID is the sandbox's id.
func (s *Sandbox) SandboxID() string { return s.sbx.ID() }

// Rayito is the Rayito sandbox underneath, for what this package does not
// cover.
func (s *Sandbox) Rayito() *rayito.Sandbox { return s.sbx }

// Kill ends the sandbox: false when it had ended already.
func (s *Sandbox) Kill(ctx context.Context) (bool, error) {
	return kill(ctx, s.sbx.ID(), s.opts.rayito, func() error { return s.sbx.Kill(ctx) })
}

// SetTimeout sets the sandbox's timeout to d from now (E2B's setTimeout),
// at most 8 h from its start.
func (s *Sandbox) SetTimeout(ctx context.Context, d time.Duration) error {
	_, err := s.sbx.SetTimeout(ctx, d)
	return wrap(err)
}

// IsRunning reports whether the sandbox is running (not paused, not
// ended).
func (s *Sandbox) IsRunning(ctx context.Context) (bool, error) {
	i, err := s.sbx.Info(ctx)
	if errors.Is(err, rayito.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, wrap(err)
	}
	return stateOf(i.State) == "running", nil
}

// GetInfo describes the sandbox (E2B's getInfo).
func (s *Sandbox) GetInfo(ctx context.Context) (*SandboxInfo, error) {
	i, err := s.sbx.Info(ctx)
	if err != nil {
		return nil, wrap(err)
	}
	out := infoOf(i)
	return &out, nil
}

// Pause pauses the sandbox, keeping its memory, processes and files
// (E2B's pause): false when it was paused already.
func (s *Sandbox) Pause(ctx context.Context) (bool, error) {
	i, err := s.sbx.Info(ctx)
	if err != nil {
		return false, wrap(err)
	}
	if stateOf(i.State) == "paused" {
		return false, nil
	}
	return true, wrap(s.sbx.Pause(ctx))
}

// RunCode runs code in the sandbox's stateful interpreter (the
// code-interpreter SDK's runCode).
func (s *Sandbox) RunCode(ctx context.Context, code string, opts ...rayito.CodeOption) (*rayito.Execution, error) {
	e, err := s.sbx.RunCode(ctx, code, opts...)
	return e, wrap(err)
}

// GetHost is E2B's getHost(port): a public host name for a port. Rayito
// has no public host per port; (*rayito.Sandbox).Port gives the URL and an
// HTTP client that reach a port on both backends.
func (s *Sandbox) GetHost(port int) (string, error) {
	return "", unimplemented("getHost", "use Sandbox.Rayito().Port(port): its URL and Client reach the port")
}

// CreateSnapshot is E2B's createSnapshot; not implemented.
func (s *Sandbox) CreateSnapshot(ctx context.Context) (string, error) {
	return "", unimplemented("createSnapshot", "Pause keeps the sandbox's memory and files; connect resumes it")
}

// GetMcpURL is E2B's getMcpUrl; Rayito has no MCP gateway.
func (s *Sandbox) GetMcpURL() (string, error) { return "", unimplemented("getMcpUrl", "") }
