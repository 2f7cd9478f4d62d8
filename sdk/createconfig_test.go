package rayito

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/sdk/internal/hook"
)

// fakeNetwork counts UpdateNetwork calls and answers with state.
type fakeNetwork struct {
	raydv1connect.UnimplementedNetworkServiceHandler
	updates atomic.Int32
	state   *raydv1.NetworkState
	err     error
}

func (f *fakeNetwork) UpdateNetwork(context.Context, *connect.Request[raydv1.UpdateNetworkRequest]) (*connect.Response[raydv1.UpdateNetworkResponse], error) {
	f.updates.Add(1)
	if f.err != nil {
		return nil, f.err
	}
	return connect.NewResponse(&raydv1.UpdateNetworkResponse{State: f.state}), nil
}

// withNetwork mounts fn in front of p's handler.
func withNetwork(p *platform, fn *fakeNetwork) {
	mux := http.NewServeMux()
	path, h := raydv1connect.NewNetworkServiceHandler(fn)
	mux.Handle(path, h)
	mux.Handle("/", p.srv.Config.Handler)
	p.srv.Config.Handler = mux
}

// appliedAll answers every section of a request APPLIED.
func appliedAll(r *raydv1.ConfigureRequest) []*raydv1.SectionResult {
	var out []*raydv1.SectionResult
	add := func(on bool, s raydv1.ConfigSection) {
		if on {
			out = append(out, &raydv1.SectionResult{Section: s, Code: raydv1.SectionCode_SECTION_CODE_APPLIED})
		}
	}
	add(r.SecretGateway != nil, raydv1.ConfigSection_CONFIG_SECTION_SECRET_GATEWAY)
	add(r.SecretPlaceholders != nil, raydv1.ConfigSection_CONFIG_SECTION_SECRET_PLACEHOLDERS)
	add(r.LifecycleEvents != nil, raydv1.ConfigSection_CONFIG_SECTION_LIFECYCLE_EVENTS)
	add(r.TelemetryExport != nil, raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT)
	return out
}

// Create is one transaction (issue 34): the run payload installs the
// network policy and the ready Health answer says it is in force, so no
// UpdateNetwork follows; the secret gateway and the metrics export go in
// one Configure call. A rayd that does not say (UNSPECIFIED), or a policy
// with the operator proxy, takes the RPC path; a failed install or a
// refused section kills the sandbox, keep-on-failure or not.
func TestCreateOneTransaction(t *testing.T) {
	t.Parallel()
	policy := NetworkPolicy{AllowOut: []string{"api.example.com"}}
	setup := func(t *testing.T, run raydv1.RunNetwork) (*platform, *fakeConfigure, *fakeNetwork) {
		p := newPlatform(t)
		p.health.runNetwork.Store(int32(run))
		fc := &fakeConfigure{answers: appliedAll, status: &raydv1.ConfigureStatusResponse{}}
		withConfigure(p, fc)
		fn := &fakeNetwork{state: &raydv1.NetworkState{AllowOut: policy.AllowOut, Enforcement: raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_GUEST_ROUTES_AND_PROXY}}
		withNetwork(p, fn)
		return p, fc, fn
	}
	opts := func(t *testing.T, p *platform, more ...Option) []Option {
		return p.opts(t, append([]Option{WithNetwork(policy), withTestGateway(), WithTelemetry(testExport())}, more...)...)
	}

	t.Run("in force", func(t *testing.T) {
		p, fc, fn := setup(t, raydv1.RunNetwork_RUN_NETWORK_IN_FORCE)
		if _, err := Create(t.Context(), opts(t, p)...); err != nil {
			t.Fatal(err)
		}
		fc.mu.Lock()
		defer fc.mu.Unlock()
		if len(fc.reqs) != 1 || fc.reqs[0].GetSecretGateway() == nil || fc.reqs[0].GetTelemetryExport() == nil {
			t.Fatalf("%d Configure calls (want one with the gateway and the export): %v", len(fc.reqs), fc.reqs)
		}
		if n := fn.updates.Load(); n != 0 {
			t.Errorf("%d UpdateNetwork calls after the payload's policy was in force", n)
		}
	})
	t.Run("older rayd", func(t *testing.T) {
		p, fc, fn := setup(t, raydv1.RunNetwork_RUN_NETWORK_UNSPECIFIED)
		if _, err := Create(t.Context(), opts(t, p)...); err != nil {
			t.Fatal(err)
		}
		if n := fn.updates.Load(); n != 1 {
			t.Errorf("%d UpdateNetwork calls for a rayd that does not say, want 1", n)
		}
		fc.mu.Lock()
		defer fc.mu.Unlock()
		if len(fc.reqs) != 1 {
			t.Errorf("%d Configure calls", len(fc.reqs))
		}
	})
	t.Run("operator proxy", func(t *testing.T) {
		p, _, fn := setup(t, raydv1.RunNetwork_RUN_NETWORK_IN_FORCE)
		proxied := policy
		proxied.EgressProxy = &EgressProxy{Address: "proxy.example.com:1080"}
		if _, err := Create(t.Context(), opts(t, p, WithNetwork(proxied))...); err != nil {
			t.Fatal(err)
		}
		if n := fn.updates.Load(); n != 1 {
			t.Errorf("%d UpdateNetwork calls with an operator proxy (its credentials travel only by RPC), want 1", n)
		}
	})
	t.Run("failed install", func(t *testing.T) {
		p, fc, fn := setup(t, raydv1.RunNetwork_RUN_NETWORK_FAILED)
		fn.err = connect.NewError(connect.CodeInvalidArgument, errors.New("allow_out[0]: not a host"))
		_, err := Create(t.Context(), opts(t, p, WithKeepOnFailure())...)
		if err == nil || p.health.terminates.Load()+p.killed.Load() == 0 {
			t.Fatalf("Create = %v with %d kills; want an error and the sandbox killed", err, p.health.terminates.Load()+p.killed.Load())
		}
		fc.mu.Lock()
		defer fc.mu.Unlock()
		if len(fc.reqs) != 0 {
			t.Errorf("Configure called after the network failed")
		}
	})
	t.Run("unavailable", func(t *testing.T) {
		p, _, fn := setup(t, raydv1.RunNetwork_RUN_NETWORK_UNAVAILABLE)
		_, err := Create(t.Context(), opts(t, p)...)
		if ReasonOf(err) != ReasonEgressUnavailable || fn.updates.Load() != 0 {
			t.Errorf("Create = %v after %d UpdateNetwork calls; want egress_unavailable without a call", err, fn.updates.Load())
		}
	})
	t.Run("section refused", func(t *testing.T) {
		p, fc, _ := setup(t, raydv1.RunNetwork_RUN_NETWORK_IN_FORCE)
		fc.answers = func(r *raydv1.ConfigureRequest) []*raydv1.SectionResult {
			out := appliedAll(r)
			for _, x := range out {
				if x.Section == raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT {
					x.Code, x.ErrorClass, x.Message = raydv1.SectionCode_SECTION_CODE_INVALID, "invalid", "endpoint: must be https"
				}
			}
			return out
		}
		_, err := Create(t.Context(), opts(t, p, WithKeepOnFailure())...)
		if err == nil || p.health.terminates.Load()+p.killed.Load() == 0 {
			t.Fatalf("Create = %v with %d kills; want an error and the sandbox killed", err, p.health.terminates.Load()+p.killed.Load())
		}
	})
}

// testGateway is an extension value (hook.Configurer, as sdk/secrets'
// gateways are) that adds a secret gateway route to Create's Configure.
type testGateway struct{ configured *bool }

type testGatewayKey struct{}

func withTestGateway() Option {
	return hook.NewOption(testGatewayKey{}, func(any) any { return testGateway{configured: new(bool)} }).(Option)
}

func (testGateway) ConfigureSandbox(_ context.Context, _ any, req *raydv1.ConfigureRequest) (bool, error) {
	req.SecretGateway = &raydv1.SecretGatewayConfig{Routes: []*raydv1.GatewayRoute{{Name: "llm", Upstream: "https://api.example.com",
		Headers: []*raydv1.GatewayHeader{{Name: "Authorization", Prefix: "Bearer ", Secret: "sk-canary-71"}},
		Rules:   []*raydv1.GatewayRule{{Method: "POST", Path: "/v1/*"}}}}}
	return true, nil
}

func (g testGateway) SandboxConfigured(_ any, results []*raydv1.SectionResult) error {
	*g.configured = true
	return sectionResult(results, raydv1.ConfigSection_CONFIG_SECTION_SECRET_GATEWAY, "secret gateway")
}

func (testGateway) NeedsEgress() bool { return true }
