package rayito

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
)

const telemetryToken = "otlp-TOKEN-canary-5d1e"

// fakeConfigure records Configure requests and answers with answer.
type fakeConfigure struct {
	raydv1connect.UnimplementedConfigureServiceHandler
	mu     sync.Mutex
	reqs   []*raydv1.ConfigureRequest
	answer func(*raydv1.ConfigureRequest) *raydv1.SectionResult
	// answers, when set, answers instead of answer (several sections).
	answers func(*raydv1.ConfigureRequest) []*raydv1.SectionResult
	status  *raydv1.ConfigureStatusResponse
}

func (f *fakeConfigure) Configure(_ context.Context, r *connect.Request[raydv1.ConfigureRequest]) (*connect.Response[raydv1.ConfigureResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, r.Msg)
	if f.answers != nil {
		return connect.NewResponse(&raydv1.ConfigureResponse{Results: f.answers(r.Msg), ConfigGeneration: 1}), nil
	}
	return connect.NewResponse(&raydv1.ConfigureResponse{Results: []*raydv1.SectionResult{f.answer(r.Msg)}, ConfigGeneration: 1}), nil
}

func (f *fakeConfigure) ConfigureStatus(context.Context, *connect.Request[raydv1.ConfigureStatusRequest]) (*connect.Response[raydv1.ConfigureStatusResponse], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return connect.NewResponse(f.status), nil
}

// withConfigure mounts fc in front of p's handler.
func withConfigure(p *platform, fc *fakeConfigure) {
	mux := http.NewServeMux()
	path, h := raydv1connect.NewConfigureServiceHandler(fc)
	mux.Handle(path, h)
	mux.Handle("/", p.srv.Config.Handler)
	p.srv.Config.Handler = mux
}

func applied(*raydv1.ConfigureRequest) *raydv1.SectionResult {
	return &raydv1.SectionResult{Section: raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT, Code: raydv1.SectionCode_SECTION_CODE_APPLIED}
}

func testExport() TelemetryExport {
	return TelemetryExport{Endpoint: "https://collector.example", Interval: 30 * time.Second, ServiceName: "svc",
		Names: TelemetryNamesE2B, ImageName: "img", ImageVersion: "2", Auth: OtlpBearer(telemetryToken)}
}

func TestWithTelemetry(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	fc := &fakeConfigure{answer: applied, status: &raydv1.ConfigureStatusResponse{Sections: []*raydv1.SectionResult{{
		Section: raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT, Code: raydv1.SectionCode_SECTION_CODE_APPLIED,
		Telemetry: &raydv1.TelemetryStatus{Exported: 4, Dropped: 1, LastErrorClass: "server_error"},
	}}}}
	withConfigure(p, fc)
	sbx, err := Create(t.Context(), p.opts(t, WithTelemetry(testExport()))...)
	if err != nil {
		t.Fatal(err)
	}
	fc.mu.Lock()
	if len(fc.reqs) != 1 {
		t.Fatalf("%d Configure calls", len(fc.reqs))
	}
	sec := fc.reqs[0].GetTelemetryExport()
	fc.mu.Unlock()
	if sec.GetIntervalS() != 30 || sec.GetEndpoint() != "https://collector.example" || sec.GetNames() != raydv1.TelemetryNames_TELEMETRY_NAMES_E2B ||
		sec.GetServiceName() != "svc" || sec.GetImageName() != "img" || sec.GetImageVersion() != "2" || sec.GetBearer().GetToken() != telemetryToken {
		t.Errorf("section %v", sec)
	}
	st, err := sbx.TelemetryStatus(t.Context())
	if err != nil || st != (TelemetryStatus{Configured: true, Exported: 4, Dropped: 1, LastErrorClass: "server_error"}) {
		t.Errorf("TelemetryStatus = %+v, %v", st, err)
	}
	// The token never shows in a format of the options.
	for _, s := range []string{fmt.Sprint(testExport()), fmt.Sprintf("%+v", testExport()), fmt.Sprintf("%#v", testExport())} {
		if strings.Contains(s, telemetryToken) {
			t.Errorf("token in %q", s)
		}
	}
}

// No option: no Configure call.
func TestNoTelemetryNoConfigure(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	fc := &fakeConfigure{answer: applied, status: &raydv1.ConfigureStatusResponse{}}
	withConfigure(p, fc)
	sbx, err := Create(t.Context(), p.opts(t)...)
	if err != nil {
		t.Fatal(err)
	}
	if len(fc.reqs) != 0 {
		t.Errorf("Configure called %d times", len(fc.reqs))
	}
	if st, err := sbx.TelemetryStatus(t.Context()); err != nil || st.Configured {
		t.Errorf("TelemetryStatus = %+v, %v", st, err)
	}
}

// The daemon refuses the section: the sandbox is killed and Create fails
// typed; bad options fail before any sandbox exists.
func TestWithTelemetryRefused(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	fc := &fakeConfigure{answer: func(*raydv1.ConfigureRequest) *raydv1.SectionResult {
		return &raydv1.SectionResult{Section: raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT, Code: raydv1.SectionCode_SECTION_CODE_INVALID,
			ErrorClass: "invalid", Message: "endpoint: must be https (http only to a loopback address)"}
	}}
	withConfigure(p, fc)
	_, err := Create(t.Context(), p.opts(t, WithTelemetry(testExport()))...)
	if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "endpoint") || strings.Contains(err.Error(), telemetryToken) {
		t.Fatalf("Create = %v", err)
	}
	if p.killed.Load() != 1 {
		t.Errorf("killed %d times", p.killed.Load())
	}

	fc.answer = func(*raydv1.ConfigureRequest) *raydv1.SectionResult {
		return &raydv1.SectionResult{Section: raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT, Code: raydv1.SectionCode_SECTION_CODE_UNSUPPORTED, ErrorClass: "no_execution_role"}
	}
	e := testExport()
	e.Auth = OtlpExecutionRole()
	if _, err := Create(t.Context(), p.opts(t, WithTelemetry(e))...); ReasonOf(err) != ReasonUnimplemented || !strings.Contains(err.Error(), "no_execution_role") {
		t.Fatalf("Create = %v", err)
	}

	runs := len(p.runs)
	for name, mod := range map[string]func(*TelemetryExport){
		"interval": func(e *TelemetryExport) { e.Interval = 5 * time.Second },
		"fraction": func(e *TelemetryExport) { e.Interval = 15500 * time.Millisecond },
		"names":    func(e *TelemetryExport) { e.Names = "x" },
		"auth":     func(e *TelemetryExport) { e.Auth = OtlpAuth{} },
	} {
		e := testExport()
		mod(&e)
		if _, err := Create(t.Context(), p.opts(t, WithTelemetry(e))...); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(p.runs) != runs {
		t.Errorf("a sandbox was created for bad options")
	}
}
