package rayito

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/accesstoken"
	"github.com/rayito-dev/rayito/proto/compat"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// fakeSandbox is a local platform with one sandbox, microvm-1, whose
// daemon answers only Health (ready, with agentVersion), on one server:
// the local backend sends the control plane and the data plane to the
// same address.
type fakeSandbox struct {
	srv          *httptest.Server
	agentVersion string
	healthFails  atomic.Bool
	// metrics and history answer Metrics and MetricsHistory; lifecycle is
	// Health's lifecycle field.
	metrics    func() (*raydv1.MetricsResponse, error)
	history    func(*raydv1.MetricsHistoryRequest) (*raydv1.MetricsHistoryResponse, error)
	lifecycle  *raydv1.LifecycleState
	runs       atomic.Int32
	terminates atomic.Int32
	healths    atomic.Int32
	// runNetwork is Health's run_network (a raydv1.RunNetwork).
	runNetwork atomic.Int32
}

const fakeID = "microvm-1"

func newFakeSandbox(t *testing.T, agentVersion string) *fakeSandbox {
	t.Helper()
	f := &fakeSandbox{agentVersion: agentVersion}
	vm := func(state microvmsapi.State) []byte {
		b, _ := json.Marshal(&microvmsapi.Microvm{MicrovmID: fakeID, State: state, Endpoint: "x.microvms.localhost"})
		return b
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+microvmsapi.PathMicrovms, func(w http.ResponseWriter, r *http.Request) {
		f.runs.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(vm(microvmsapi.StateRunning))
	})
	mux.HandleFunc("GET "+microvmsapi.MicrovmPath(fakeID), func(w http.ResponseWriter, r *http.Request) {
		state := microvmsapi.StateRunning
		if f.terminates.Load() > 0 {
			state = microvmsapi.StateTerminating
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(vm(state))
	})
	mux.HandleFunc("DELETE "+microvmsapi.MicrovmPath(fakeID), func(w http.ResponseWriter, r *http.Request) {
		f.terminates.Add(1)
	})
	mux.HandleFunc("POST "+microvmsapi.AuthTokenPath(fakeID), func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&microvmsapi.CreateMicrovmAuthTokenOutput{AuthToken: map[string]string{microvmsapi.AuthTokenResponseKey: "jwe"}})
	})
	mux.Handle(raydv1connect.NewHealthServiceHandler(fakeHealth{f: f}))
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSandbox) opts(more ...Option) []Option {
	return append([]Option{WithBackend(BackendLocal), WithEndpoint(f.srv.URL)}, more...)
}

type fakeHealth struct {
	raydv1connect.UnimplementedHealthServiceHandler
	f *fakeSandbox
}

func (h fakeHealth) Health(context.Context, *connect.Request[raydv1.HealthRequest]) (*connect.Response[raydv1.HealthResponse], error) {
	h.f.healths.Add(1)
	if h.f.healthFails.Load() {
		return nil, connect.NewError(connect.CodeUnavailable, errors.New("down"))
	}
	return connect.NewResponse(&raydv1.HealthResponse{AgentReady: true, AgentVersion: h.f.agentVersion, SandboxId: fakeID, Lifecycle: h.f.lifecycle,
		RunNetwork: raydv1.RunNetwork(h.f.runNetwork.Load())}), nil
}

func (h fakeHealth) Metrics(context.Context, *connect.Request[raydv1.MetricsRequest]) (*connect.Response[raydv1.MetricsResponse], error) {
	m, err := h.f.metrics()
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(m), nil
}

func (h fakeHealth) MetricsHistory(_ context.Context, r *connect.Request[raydv1.MetricsHistoryRequest]) (*connect.Response[raydv1.MetricsHistoryResponse], error) {
	m, err := h.f.history(r.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(m), nil
}

// logBuffer collects a logger's text output.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (b *logBuffer) warnings() int { return strings.Count(b.String(), "level=WARN") }

// Version must have a row in the table it ships with, and say the same as
// a rayd of the same release.
func TestVersionIsInTheCompatTable(t *testing.T) {
	t.Parallel()
	if res, err := compat.Check(Version, Version); res != compat.Compatible || err != nil {
		t.Fatalf("compat.Check(%q, itself) = %v, %v", Version, res, err)
	}
	if res, err := compat.Check(Version, Version+"-dev"); res != compat.Compatible || err != nil {
		t.Fatalf("a -dev rayd of the same minor: %v, %v", res, err)
	}
}

func TestCreateWithCompatibleAgent(t *testing.T) {
	t.Parallel()
	f := newFakeSandbox(t, "0.1.0-dev")
	var logs logBuffer
	sbx, err := Create(t.Context(), f.opts(WithLogger(logs.logger()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.dp.close()
	if f.terminates.Load() != 0 || logs.warnings() != 0 {
		t.Fatalf("terminates %d, log %q", f.terminates.Load(), logs.String())
	}
	other, err := Connect(t.Context(), sbx.ID(), f.opts(WithAccessToken(sbx.AccessToken()), WithLogger(logs.logger()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer other.dp.close()
	if f.healths.Load() != 2 || logs.warnings() != 0 {
		t.Fatalf("%d Health calls (want one each for Create and Connect), log %q", f.healths.Load(), logs.String())
	}
}

// A newer minor inside the SDK's range: a warning, once per Sandbox.
func TestNewerCompatibleAgentWarnsOnce(t *testing.T) {
	t.Parallel()
	f := newFakeSandbox(t, "0.2.0")
	table := withCompatTable(compat.Table{{SDK: "0.1", RaydMin: "0.1", RaydMax: "0.2"}})
	var logs logBuffer
	sbx, err := Create(t.Context(), f.opts(table, WithLogger(logs.logger()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer sbx.dp.close()
	if err := sbx.checkAgent("0.2.0"); err != nil { // checked again: no second warning
		t.Fatal(err)
	}
	if n := logs.warnings(); n != 1 {
		t.Fatalf("%d warnings, want 1: %q", n, logs.String())
	}
	out := logs.String()
	if !strings.Contains(out, "agent_version=0.2.0") || !strings.Contains(out, "sdk_version="+Version) || !strings.Contains(out, "sandbox_id="+fakeID) {
		t.Fatalf("warning without the versions: %q", out)
	}
	if strings.Contains(out, sbx.AccessToken()) {
		t.Fatal("the access token was logged")
	}
	// Another Sandbox object warns on its own.
	other, err := Connect(t.Context(), sbx.ID(), f.opts(WithAccessToken(sbx.AccessToken()), table, WithLogger(logs.logger()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer other.dp.close()
	if n := logs.warnings(); n != 2 {
		t.Fatalf("%d warnings after Connect, want 2", n)
	}
	// No logger: nothing to see, nothing fails.
	quiet, err := Connect(t.Context(), sbx.ID(), f.opts(WithAccessToken(sbx.AccessToken()), table, WithLogger(nil))...)
	if err != nil {
		t.Fatal(err)
	}
	quiet.dp.close()
}

func TestCreateWithIncompatibleAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, version string
		cause         error
	}{
		{"newer minor in major 0", "0.2.0", compat.ErrIncompatible},
		{"older major", "0.0.9", compat.ErrIncompatible},
		{"new major", "1.0.0", compat.ErrIncompatible},
		{"no version", "", compat.ErrInvalidVersion},
		{"malformed", "latest", compat.ErrInvalidVersion},
		{"too long", strings.Repeat("9", 300), compat.ErrInvalidVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeSandbox(t, tc.version)
			_, err := Create(t.Context(), f.opts()...)
			if !errors.Is(err, ErrIncompatibleAgent) || !errors.Is(err, tc.cause) {
				t.Fatalf("Create = %v, want ErrIncompatibleAgent and %v", err, tc.cause)
			}
			var ie *IncompatibleAgentError
			if !errors.As(err, &ie) || ie.SDKVersion != Version || len(ie.AgentVersion) > maxAgentVersionLen || !strings.HasPrefix(tc.version, ie.AgentVersion) {
				t.Fatalf("errors.As: %+v", ie)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("error of %d bytes: %s", len(err.Error()), err)
			}
			if errors.Is(err, ErrNotReady) {
				t.Fatal("reported as not ready")
			}
			if n := f.terminates.Load(); n != 1 {
				t.Fatalf("%d terminations, want 1: the sandbox leaked", n)
			}
			if n := f.healths.Load(); n != 1 {
				t.Fatalf("%d Health calls: an incompatible agent is final", n)
			}
		})
	}
}

func TestCreateKeepsAnIncompatibleSandboxOnRequest(t *testing.T) {
	t.Parallel()
	f := newFakeSandbox(t, "0.2.0")
	if _, err := Create(t.Context(), f.opts(WithKeepOnFailure())...); !errors.Is(err, ErrIncompatibleAgent) {
		t.Fatal(err)
	}
	if n := f.terminates.Load(); n != 0 {
		t.Fatalf("%d terminations with WithKeepOnFailure", n)
	}
}

func TestConnectChecksTheAgent(t *testing.T) {
	t.Parallel()
	token, err := accesstoken.New()
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeSandbox(t, "0.2.0")
	_, err = Connect(t.Context(), fakeID, f.opts(WithAccessToken(token))...)
	var ie *IncompatibleAgentError
	if !errors.Is(err, ErrIncompatibleAgent) || !errors.As(err, &ie) || ie.AgentVersion != "0.2.0" || ie.SDKVersion != Version {
		t.Fatalf("Connect = %v", err)
	}
	if !strings.Contains(err.Error(), "0.2.0") || !strings.Contains(err.Error(), Version) {
		t.Fatalf("message %q lacks the versions", err)
	}
	if f.terminates.Load() != 0 {
		t.Fatal("Connect terminated the sandbox")
	}

	// A daemon that does not answer Health is not checked, and Connect
	// still succeeds (Info and Kill must work on a stuck sandbox).
	down := newFakeSandbox(t, "0.2.0")
	down.healthFails.Store(true)
	var logs logBuffer
	sbx, err := Connect(t.Context(), fakeID, down.opts(WithAccessToken(token), WithLogger(logs.logger()))...)
	if err != nil {
		t.Fatalf("Connect with Health down = %v", err)
	}
	sbx.dp.close()
	if !strings.Contains(logs.String(), "level=DEBUG") || strings.Contains(logs.String(), token) {
		t.Fatalf("log %q", logs.String())
	}

	// A canceled context is an error.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Connect(ctx, fakeID, down.opts(WithAccessToken(token))...); err == nil {
		t.Fatal("Connect with a canceled context succeeded")
	}
}
