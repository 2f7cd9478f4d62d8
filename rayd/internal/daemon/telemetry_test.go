package daemon

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"connectrpc.com/connect"
	collectorpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/proto"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// A configured export sends the sandbox's gauges, with its id, when
// /suspend flushes it (the interval is 300 s: nothing else would send);
// Health says telemetry_export; after /terminate nothing is sent.
func TestTelemetryFlushOnSuspend(t *testing.T) {
	raydtest.RequireRoot(t)
	t.Parallel()
	var mu sync.Mutex
	var got []*collectorpb.ExportMetricsServiceRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-daemon" {
			t.Errorf("Authorization %q", r.Header.Get("Authorization"))
		}
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			t.Errorf("gzip: %v", err)
			return
		}
		b, _ := io.ReadAll(zr)
		m := &collectorpb.ExportMetricsServiceRequest{}
		if err := proto.Unmarshal(b, m); err != nil {
			t.Errorf("protobuf: %v", err)
		}
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	}))
	defer srv.Close()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	h := newHarness(t)
	if !h.Health().GetFeatures().GetTelemetryExport() {
		t.Fatal("Health features.telemetry_export is false")
	}
	h.Run(nil)
	c := raydv1connect.NewConfigureServiceClient(h.Client, h.APIURL, raydtest.WithToken(h.Token))
	resp, err := c.Configure(context.Background(), connect.NewRequest(&raydv1.ConfigureRequest{TelemetryExport: &raydv1.TelemetryExportConfig{
		IntervalS: 300, ServiceName: "svc", Endpoint: srv.URL,
		Auth: &raydv1.TelemetryExportConfig_Bearer{Bearer: &raydv1.BearerAuth{Token: "tok-daemon"}},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.Msg.GetResults()[0]; r.GetCode() != raydv1.SectionCode_SECTION_CODE_APPLIED {
		t.Fatalf("Configure %v", r)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d exports before the suspend", n)
	}
	h.Hook("suspend", nil)
	if n := count(); n != 1 {
		t.Fatalf("%d exports after the suspend's answer, want 1", n)
	}
	mu.Lock()
	rm := got[0].GetResourceMetrics()[0]
	mu.Unlock()
	id := ""
	for _, kv := range rm.GetResource().GetAttributes() {
		if kv.GetKey() == "rayito.sandbox.id" {
			id = kv.GetValue().GetStringValue()
		}
	}
	if id == "" || id != h.d.State.SandboxID() {
		t.Errorf("sandbox id attribute %q, want %q", id, h.d.State.SandboxID())
	}
	if n := len(rm.GetScopeMetrics()[0].GetMetrics()); n != 7 {
		t.Errorf("%d gauges", n)
	}
	h.Hook("resume", nil)
	h.Hook("terminate", nil)
	h.d.telemetry.Flush(context.Background())
	if n := count(); n != 1 {
		t.Errorf("%d exports after /terminate, want 1", n)
	}
}
