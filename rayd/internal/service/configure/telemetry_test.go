package configure

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/metrics"
	"github.com/rayito-dev/rayito/rayd/internal/telemetry"
)

const secTelemetry = raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT

// telemetryHarness is a harness whose telemetry section is served by a
// real exporter posting to a real HTTP server that records the
// Authorization headers.
func telemetryHarness(t *testing.T, mod func(*Options)) (*harness, *telemetry.Exporter, *httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var auths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auths = append(auths, r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	var ex *telemetry.Exporter
	h := newHarness(t, func(o *Options) {
		ex = telemetry.New(telemetry.Options{
			Sample:    func(context.Context) (metrics.Sample, error) { return metrics.Sample{UnixMilli: 1}, nil },
			SandboxID: func() string { return "sbx" },
			Logger:    o.Logger,
		})
		o.Telemetry = ex
		if mod != nil {
			mod(o)
		}
	})
	t.Cleanup(ex.Stop)
	return h, ex, srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), auths...)
	}
}

func telemetryReq(endpoint string, token string) *raydv1.ConfigureRequest {
	return &raydv1.ConfigureRequest{TelemetryExport: &raydv1.TelemetryExportConfig{
		IntervalS: 15, ServiceName: "svc", Names: raydv1.TelemetryNames_TELEMETRY_NAMES_RAYITO, Endpoint: endpoint,
		Auth: &raydv1.TelemetryExportConfig_Bearer{Bearer: &raydv1.BearerAuth{Token: token}},
	}}
}

func TestTelemetrySection(t *testing.T) {
	h, ex, srv, auths := telemetryHarness(t, nil)
	if !h.s.TelemetryExportSupported() {
		t.Fatal("TelemetryExportSupported false")
	}
	r := h.one(telemetryReq(srv.URL, canary))
	wantCode(t, r, secTelemetry, raydv1.SectionCode_SECTION_CODE_APPLIED, "")
	if r.GetTelemetry() == nil {
		t.Fatalf("no telemetry status: %v", r)
	}
	ex.Flush(t.Context())
	if a := auths(); len(a) != 1 || a[0] != "/v1/metrics Bearer "+canary {
		t.Fatalf("posts %q", a)
	}
	st := h.section(secTelemetry)
	if st.GetTelemetry().GetExported() != 1 || st.GetTelemetry().GetDropped() != 0 {
		t.Errorf("status %v", st)
	}

	// An invalid section names the field and keeps the export running
	// with the old token.
	bad := telemetryReq(srv.URL, canary2)
	bad.TelemetryExport.IntervalS = 5
	r = h.one(bad)
	wantCode(t, r, secTelemetry, raydv1.SectionCode_SECTION_CODE_INVALID, ClassInvalid)
	if !strings.HasPrefix(r.GetMessage(), "interval_s:") {
		t.Errorf("message %q", r.GetMessage())
	}
	bad = telemetryReq("http://collector.example/", canary2)
	r = h.one(bad)
	wantCode(t, r, secTelemetry, raydv1.SectionCode_SECTION_CODE_INVALID, ClassInvalid)
	if !strings.HasPrefix(r.GetMessage(), "endpoint:") {
		t.Errorf("message %q", r.GetMessage())
	}
	ex.Flush(t.Context())
	if a := auths(); len(a) != 2 || a[1] != "/v1/metrics Bearer "+canary {
		t.Fatalf("after the invalid sections: %q", a)
	}

	// An empty section turns it off.
	r = h.one(&raydv1.ConfigureRequest{TelemetryExport: &raydv1.TelemetryExportConfig{}})
	wantCode(t, r, secTelemetry, raydv1.SectionCode_SECTION_CODE_APPLIED, "")
	ex.Flush(t.Context())
	time.Sleep(20 * time.Millisecond)
	if a := auths(); len(a) != 2 {
		t.Errorf("posts after off: %q", a)
	}
}

func TestTelemetryExecutionRoleUnavailable(t *testing.T) {
	h, _, _, _ := telemetryHarness(t, nil)
	r := h.one(&raydv1.ConfigureRequest{TelemetryExport: &raydv1.TelemetryExportConfig{
		IntervalS: 60, Endpoint: "https://monitoring.us-east-1.amazonaws.com/v1/metrics",
		Auth: &raydv1.TelemetryExportConfig_ExecutionRole{ExecutionRole: &raydv1.ExecutionRoleAuth{}},
	}})
	wantCode(t, r, secTelemetry, raydv1.SectionCode_SECTION_CODE_UNSUPPORTED, ClassNoExecutionRole)
}

func TestTelemetryIsolation(t *testing.T) {
	h, _, srv, auths := telemetryHarness(t, func(o *Options) { o.Unsupported = ClassIsolation })
	if h.s.TelemetryExportSupported() {
		t.Error("supported under isolation")
	}
	r := h.one(telemetryReq(srv.URL, canary))
	wantCode(t, r, secTelemetry, raydv1.SectionCode_SECTION_CODE_UNSUPPORTED, ClassIsolation)
	if a := auths(); len(a) != 0 {
		t.Errorf("posts %q", a)
	}
}
