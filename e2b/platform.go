package e2b

import (
	"context"
	"io"
	"net/http"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/secrets"
)

// createSpec is a create as the gateway understood it.
type createSpec struct {
	Template     string // Rayito template; "" the platform's default
	Timeout      time.Duration
	OnTimeout    rayito.TimeoutAction
	AutoResume   bool
	Metadata     map[string]string
	Envs         map[string]string
	Network      *rayito.NetworkPolicy
	DenyInternet bool // allow_internet_access:false without an allowOut
	HeaderRules  []headerRule
}

// platform is what the gateway needs of Rayito: the rayito SDK in
// production (rayitoPlatform), a fake in the tests.
type platform interface {
	create(ctx context.Context, spec createSpec) (sandbox, error)
	connect(ctx context.Context, id string) (sandbox, error)
	getInfo(ctx context.Context, id string) (*rayito.Info, error)
	list(ctx context.Context) ([]rayito.Info, error)
	kill(ctx context.Context, id string) error
	pause(ctx context.Context, id string) error
	resume(ctx context.Context, id string) error
	// setHeaderRules replaces the header rules of a running sandbox.
	setHeaderRules(ctx context.Context, id string, rules []headerRule) error
}

// sandbox is one connected sandbox.
type sandbox interface {
	ID() string
	AccessToken() string
	Info(ctx context.Context) (*rayito.Info, error)
	SetTimeout(ctx context.Context, d time.Duration, atLeast bool) (*rayito.Lifecycle, error)
	MetricsHistory(ctx context.Context, from, to time.Time) ([]rayito.Metrics, error)
	Metrics(ctx context.Context) (*rayito.Metrics, error)
	UpdateNetwork(ctx context.Context, p rayito.NetworkPolicy) (*rayito.NetworkState, error)
	Network(ctx context.Context) (*rayito.NetworkState, error)
	// Port is how to reach port n: a base URL and the transport that
	// adds what the endpoint needs.
	Port(n int) (baseURL string, rt http.RoundTripper, err error)
	// Logs reads the daemon's records since since, at most limit.
	Logs(ctx context.Context, since time.Time, limit int) ([]rayito.LogEntry, error)
	// TarHome streams HomeDir as a tar archive into w, as the sandbox's
	// user, without holding it: w sees each piece as the sandbox sends
	// it. An error of w stops the archive (and is returned). flat (a
	// snapshot's archive): every hard link as the file it names, and an
	// unreadable file left out rather than failing the archive, as rayd's
	// checkpoints do.
	TarHome(ctx context.Context, w io.Writer, flat bool) error
	// UntarHome starts extracting a tar archive into HomeDir, as the
	// sandbox's user: write the archive to the returned writer, then
	// Close it to wait for the extraction's end.
	UntarHome(ctx context.Context) (io.WriteCloser, error)
}

// rayitoPlatform is the platform through the rayito SDK.
type rayitoPlatform struct{ opts []rayito.Option }

func (p *rayitoPlatform) with(extra ...rayito.Option) []rayito.Option {
	return append(append([]rayito.Option(nil), p.opts...), extra...)
}

func (p *rayitoPlatform) create(ctx context.Context, spec createSpec) (sandbox, error) {
	o := []rayito.Option{
		rayito.WithTimeout(spec.Timeout),
		rayito.WithOnTimeout(spec.OnTimeout),
		rayito.WithMaxLifetime(MaxLifetime),
	}
	if spec.Template != "" {
		o = append(o, rayito.WithTemplate(spec.Template))
	}
	if spec.AutoResume {
		o = append(o, rayito.WithAutoResume())
	}
	if len(spec.Metadata) > 0 {
		o = append(o, rayito.WithMetadata(spec.Metadata))
	}
	if len(spec.Envs) > 0 {
		o = append(o, rayito.WithEnvs(spec.Envs))
	}
	if spec.DenyInternet {
		o = append(o, rayito.WithAllowInternetAccess(false))
	}
	if spec.Network != nil {
		o = append(o, rayito.WithNetwork(*spec.Network))
	}
	if len(spec.HeaderRules) > 0 {
		store, rules, err := sdkHeaderRules(ctx, spec.HeaderRules)
		if err != nil {
			return nil, &httpError{http.StatusBadRequest, err.Error()}
		}
		o = append(o, secrets.WithStore(store), secrets.WithHeaderRules(rules...))
	}
	sbx, err := rayito.Create(ctx, p.with(o...)...)
	if err != nil {
		return nil, err
	}
	return rayitoSandbox{sbx}, nil
}

func (p *rayitoPlatform) setHeaderRules(ctx context.Context, id string, rules []headerRule) error {
	store, rs, err := sdkHeaderRules(ctx, rules)
	if err != nil {
		return &httpError{http.StatusBadRequest, err.Error()}
	}
	// A handle of its own, which reads the values from their store.
	sbx, err := rayito.Connect(ctx, id, p.with(secrets.WithStore(store))...)
	if err != nil {
		return err
	}
	return secrets.UpdateHeaderRules(ctx, sbx, rs...)
}

func (p *rayitoPlatform) connect(ctx context.Context, id string) (sandbox, error) {
	sbx, err := rayito.Connect(ctx, id, p.opts...)
	if err != nil {
		return nil, err
	}
	return rayitoSandbox{sbx}, nil
}

func (p *rayitoPlatform) getInfo(ctx context.Context, id string) (*rayito.Info, error) {
	return rayito.GetInfo(ctx, id, p.opts...)
}

func (p *rayitoPlatform) list(ctx context.Context) ([]rayito.Info, error) {
	return rayito.List(ctx, p.with(rayito.WithStates("PENDING", "RUNNING", "SUSPENDING", "SUSPENDED"))...)
}

func (p *rayitoPlatform) kill(ctx context.Context, id string) error {
	return rayito.Kill(ctx, id, p.opts...)
}

func (p *rayitoPlatform) pause(ctx context.Context, id string) error {
	return rayito.Pause(ctx, id, p.opts...)
}

func (p *rayitoPlatform) resume(ctx context.Context, id string) error {
	return rayito.Resume(ctx, id, p.opts...)
}

type rayitoSandbox struct{ s *rayito.Sandbox }

func (r rayitoSandbox) ID() string          { return r.s.ID() }
func (r rayitoSandbox) AccessToken() string { return r.s.AccessToken() }
func (r rayitoSandbox) Info(ctx context.Context) (*rayito.Info, error) {
	return r.s.Info(ctx)
}

func (r rayitoSandbox) SetTimeout(ctx context.Context, d time.Duration, atLeast bool) (*rayito.Lifecycle, error) {
	if atLeast {
		return r.s.SetTimeout(ctx, d, rayito.AtLeast())
	}
	return r.s.SetTimeout(ctx, d)
}

func (r rayitoSandbox) MetricsHistory(ctx context.Context, from, to time.Time) ([]rayito.Metrics, error) {
	return r.s.MetricsHistory(ctx, from, to, 0)
}

func (r rayitoSandbox) Logs(ctx context.Context, since time.Time, limit int) ([]rayito.LogEntry, error) {
	return r.s.Logs(ctx, since, limit)
}

func (r rayitoSandbox) Metrics(ctx context.Context) (*rayito.Metrics, error) {
	return r.s.Metrics(ctx)
}

func (r rayitoSandbox) UpdateNetwork(ctx context.Context, p rayito.NetworkPolicy) (*rayito.NetworkState, error) {
	return r.s.UpdateNetwork(ctx, p)
}

func (r rayitoSandbox) Network(ctx context.Context) (*rayito.NetworkState, error) {
	return r.s.Network(ctx)
}

func (r rayitoSandbox) Port(n int) (string, http.RoundTripper, error) {
	p, err := r.s.Port(n)
	if err != nil {
		return "", nil, err
	}
	return p.URL(), p.Client().Transport, nil
}
