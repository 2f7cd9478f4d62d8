package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/proto"

	"github.com/rayito-dev/rayito/rayd/internal/metrics"
)

const testToken = "tok-SECRET-7f3a9c"

// collector is a real OTLP/HTTP endpoint: it decodes each request (gzip,
// protobuf) and answers with the codes its script gives.
type collector struct {
	t     *testing.T
	mu    sync.Mutex
	reqs  []*collectorpb.ExportMetricsServiceRequest
	auths []string
	codes []int // answered in turn; the last one repeats; empty: 200
	calls atomic.Int64
	srv   *httptest.Server
}

func newCollector(t *testing.T, codes ...int) *collector {
	t.Helper()
	c := &collector{t: t, codes: codes}
	c.srv = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *collector) serve(w http.ResponseWriter, r *http.Request) {
	n := int(c.calls.Add(1)) - 1
	if r.Method != http.MethodPost || r.URL.Path != "/v1/metrics" || r.Header.Get("Content-Type") != "application/x-protobuf" ||
		r.Header.Get("Content-Encoding") != "gzip" {
		c.t.Errorf("request %s %s type %q encoding %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		c.t.Errorf("gzip: %v", err)
		return
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		c.t.Errorf("gzip body: %v", err)
		return
	}
	m := &collectorpb.ExportMetricsServiceRequest{}
	if err := proto.Unmarshal(raw, m); err != nil {
		c.t.Errorf("protobuf: %v", err)
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, m)
	c.auths = append(c.auths, r.Header.Get("Authorization"))
	code := http.StatusOK
	if len(c.codes) > 0 {
		code = c.codes[min(n, len(c.codes)-1)]
	}
	c.mu.Unlock()
	w.WriteHeader(code)
}

func (c *collector) received() ([]*collectorpb.ExportMetricsServiceRequest, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*collectorpb.ExportMetricsServiceRequest(nil), c.reqs...), append([]string(nil), c.auths...)
}

func sample(context.Context) (metrics.Sample, error) {
	return metrics.Sample{UnixMilli: 1_700_000_000_000, CPUPercent: 12.5, CPUCount: 2, MemUsed: 100 << 20, MemTotal: 512 << 20,
		MemCache: 7 << 20, DiskUsed: 1 << 30, DiskTotal: 10 << 30, Processes: 3}, nil
}

func testConfig(t *testing.T, c *collector, iv time.Duration) *Config {
	t.Helper()
	u, err := url.Parse(c.srv.URL + "/v1/metrics")
	if err != nil {
		t.Fatal(err)
	}
	return &Config{Endpoint: u, Interval: iv, ServiceName: "svc", Names: NamesRayito, ImageName: "img", ImageVersion: "3",
		Auth: AuthBearer, Token: testToken}
}

func newExporter(t *testing.T, log *slog.Logger, mod func(*Options)) *Exporter {
	t.Helper()
	o := Options{Sample: sample, SandboxID: func() string { return "sbx-1" }, Logger: log, Backoff: 5 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	e := New(o)
	t.Cleanup(e.Stop)
	return e
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestExportGaugesAttributesBearer(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	col := newCollector(t)
	e := newExporter(t, log, nil)
	if err := e.Configure(testConfig(t, col, 20*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "two exports", func() bool { return e.Status().Exported >= 2 })
	reqs, auths := col.received()
	if auths[0] != "Bearer "+testToken {
		t.Errorf("Authorization = %q", auths[0])
	}
	rms := reqs[0].GetResourceMetrics()
	if len(rms) != 1 {
		t.Fatalf("resource metrics: %d", len(rms))
	}
	attrs := map[string]string{}
	for _, kv := range rms[0].GetResource().GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	want := map[string]string{"service.name": "svc", "rayito.sandbox.id": "sbx-1", "rayito.image.name": "img", "rayito.image.version": "3"}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, attrs[k], v)
		}
	}
	got := map[string]*metricspb.NumberDataPoint{}
	for _, m := range rms[0].GetScopeMetrics()[0].GetMetrics() {
		dps := m.GetGauge().GetDataPoints()
		if len(dps) != 1 {
			t.Fatalf("%s: %d points (a gauge with one point expected)", m.GetName(), len(dps))
		}
		got[m.GetName()] = dps[0]
	}
	if len(got) != 7 {
		t.Fatalf("%d gauges: %v", len(got), got)
	}
	if v := got["rayito.sandbox.cpu.utilization"].GetAsDouble(); v != 12.5 {
		t.Errorf("cpu = %v", v)
	}
	for name, v := range map[string]int64{"rayito.sandbox.memory.used": 100 << 20, "rayito.sandbox.memory.total": 512 << 20,
		"rayito.sandbox.memory.cache": 7 << 20, "rayito.sandbox.disk.used": 1 << 30, "rayito.sandbox.disk.total": 10 << 30,
		"rayito.sandbox.processes": 3} {
		if got[name].GetAsInt() != v {
			t.Errorf("%s = %d, want %d", name, got[name].GetAsInt(), v)
		}
	}
	if ts := got["rayito.sandbox.processes"].GetTimeUnixNano(); ts != 1_700_000_000_000*1e6 {
		t.Errorf("time = %d", ts)
	}
	if st := e.Status(); st.Dropped != 0 || st.LastErrorClass != "" {
		t.Errorf("status %+v", st)
	}
	if strings.Contains(logs.String(), testToken) || strings.Contains(logs.String(), col.srv.URL) {
		t.Errorf("the token or the endpoint is in the logs:\n%s", logs.String())
	}
}

func TestE2BNames(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	e := newExporter(t, nil, nil)
	c := testConfig(t, col, 20*time.Millisecond)
	c.Names = NamesE2B
	if err := e.Configure(c); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an export", func() bool { return e.Status().Exported >= 1 })
	reqs, _ := col.received()
	rm := reqs[0].GetResourceMetrics()[0]
	if n := rm.GetScopeMetrics()[0].GetMetrics()[0].GetName(); n != "e2b.sandbox.cpu.used_pct" {
		t.Errorf("first gauge %q", n)
	}
	found := false
	for _, kv := range rm.GetResource().GetAttributes() {
		found = found || kv.GetKey() == "e2b.sandbox.id" && kv.GetValue().GetStringValue() == "sbx-1"
	}
	if !found {
		t.Error("no e2b.sandbox.id attribute")
	}
}

// A 4xx drops the batch at once; a 5xx is retried and then exported.
func TestRetryOn5xxDropOn4xx(t *testing.T) {
	t.Parallel()
	t.Run("5xx", func(t *testing.T) {
		t.Parallel()
		col := newCollector(t, 503, 500, 200)
		e := newExporter(t, nil, nil)
		if err := e.Configure(testConfig(t, col, time.Hour)); err != nil {
			t.Fatal(err)
		}
		e.mu.Lock()
		e.gen++ // keep the hour-long timer; sample now through a flush
		e.mu.Unlock()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		e.Flush(ctx) // 503, 500: two posts, then a retry armed
		waitFor(t, "the retry", func() bool { return e.Status().Exported == 1 })
		if st := e.Status(); st.Dropped != 0 || st.LastErrorClass != ClassServerError {
			t.Errorf("status %+v", st)
		}
		if n := col.calls.Load(); n != 3 {
			t.Errorf("%d posts, want 3", n)
		}
	})
	t.Run("4xx", func(t *testing.T) {
		t.Parallel()
		col := newCollector(t, 400)
		e := newExporter(t, nil, nil)
		if err := e.Configure(testConfig(t, col, time.Hour)); err != nil {
			t.Fatal(err)
		}
		e.Flush(t.Context())
		if st := e.Status(); st.Dropped != 1 || st.Exported != 0 || st.LastErrorClass != ClassRejected {
			t.Errorf("status %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
		if n := col.calls.Load(); n != 1 {
			t.Errorf("%d posts, want 1 (a 4xx is not retried)", n)
		}
	})
	t.Run("401", func(t *testing.T) {
		t.Parallel()
		col := newCollector(t, 401)
		e := newExporter(t, nil, nil)
		if err := e.Configure(testConfig(t, col, time.Hour)); err != nil {
			t.Fatal(err)
		}
		e.Flush(t.Context())
		if st := e.Status(); st.Dropped != 1 || st.LastErrorClass != ClassUnauthorized {
			t.Errorf("status %+v", st)
		}
	})
	t.Run("retries run out", func(t *testing.T) {
		t.Parallel()
		col := newCollector(t, 502)
		e := newExporter(t, nil, func(o *Options) { o.MaxAttempts = 3 })
		if err := e.Configure(testConfig(t, col, time.Hour)); err != nil {
			t.Fatal(err)
		}
		e.Flush(t.Context())
		waitFor(t, "the drop", func() bool { return e.Status().Dropped == 1 })
		if n := col.calls.Load(); n != 3 {
			t.Errorf("%d posts, want 3", n)
		}
	})
	t.Run("transport", func(t *testing.T) {
		t.Parallel()
		col := newCollector(t)
		c := testConfig(t, col, time.Hour)
		col.srv.Close()
		e := newExporter(t, nil, func(o *Options) { o.MaxAttempts = 2 })
		if err := e.Configure(c); err != nil {
			t.Fatal(err)
		}
		e.Flush(t.Context())
		waitFor(t, "the drop", func() bool { return e.Status().Dropped == 1 })
		if st := e.Status(); st.LastErrorClass != ClassNetwork {
			t.Errorf("status %+v", st)
		}
	})
}

// A full queue drops the oldest batch and counts it; the newest are sent.
func TestQueueOverflow(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	var fail atomic.Bool
	fail.Store(true)
	gate := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		col.serve(w, r)
	})
	col.srv.Config.Handler = gate
	e := newExporter(t, nil, func(o *Options) {
		o.Queue = 3
		o.Backoff = time.Hour // the first failure parks the queue
		o.MaxAttempts = 100
	})
	if err := e.Configure(testConfig(t, col, 10*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "drops", func() bool { return e.Status().Dropped >= 2 })
	// The retries (at most one per interval) and the drops race for the
	// class: either is right here (TestQueueFullClass pins it).
	st := e.Status()
	if st.LastErrorClass != ClassQueueFull && st.LastErrorClass != ClassServerError || st.Exported != 0 {
		t.Errorf("status %+v", st)
	}
	e.mu.Lock()
	q := len(e.queue)
	e.mu.Unlock()
	if q != 3 {
		t.Errorf("queue holds %d, want 3", q)
	}
	fail.Store(false)
	e.Flush(t.Context())
	if got := e.Status(); got.Exported < 3 {
		t.Errorf("after the flush %+v", got)
	}
}

// Flush sends a fresh sample at once (suspend), within its budget even
// when the collector hangs.
func TestFlush(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	e := newExporter(t, nil, nil)
	if err := e.Configure(testConfig(t, col, time.Hour)); err != nil {
		t.Fatal(err)
	}
	e.Flush(t.Context())
	if st := e.Status(); st.Exported != 1 {
		t.Fatalf("status %+v", st)
	}

	hang := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hang)
	e2 := newExporter(t, nil, nil)
	c := testConfig(t, col, time.Hour)
	c.Endpoint, _ = url.Parse(slow.URL + "/v1/metrics")
	if err := e2.Configure(c); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	e2.Flush(ctx)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("flush took %v", d)
	}
}

// Flush and Stop on an exporter never configured return at once.
func TestIdle(t *testing.T) {
	t.Parallel()
	e := New(Options{Sample: sample})
	e.Flush(t.Context())
	e.Stop()
	e.Stop()
	if err := e.Configure(&Config{Auth: AuthExecutionRole}); !errors.Is(err, ErrExecutionRole) {
		t.Errorf("execution role without a signer: %v", err)
	}
}

// Turning the export off drops the queue and stops posting.
func TestOff(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	e := newExporter(t, nil, nil)
	if err := e.Configure(testConfig(t, col, 10*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an export", func() bool { return e.Status().Exported >= 1 })
	if err := e.Configure(nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond)
	n := col.calls.Load()
	time.Sleep(60 * time.Millisecond)
	if m := col.calls.Load(); m != n {
		t.Errorf("posts went on after off: %d -> %d", n, m)
	}
}

type fakeSigner struct{ err error }

func (f fakeSigner) Sign(_ context.Context, req *http.Request, _ []byte) error {
	if f.err != nil {
		return f.err
	}
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 test")
	return nil
}

func TestExecutionRoleSigner(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	e := newExporter(t, nil, func(o *Options) { o.Signer = fakeSigner{} })
	c := testConfig(t, col, time.Hour)
	c.Auth, c.Token = AuthExecutionRole, ""
	if err := e.Configure(c); err != nil {
		t.Fatal(err)
	}
	e.Flush(t.Context())
	_, auths := col.received()
	if len(auths) != 1 || auths[0] != "AWS4-HMAC-SHA256 test" {
		t.Errorf("auths %q", auths)
	}
	e2 := newExporter(t, nil, func(o *Options) { o.Signer = fakeSigner{err: errors.New("no creds")}; o.MaxAttempts = 1 })
	if err := e2.Configure(c); err != nil {
		t.Fatal(err)
	}
	e2.Flush(t.Context())
	if st := e2.Status(); st.LastErrorClass != ClassNoCredentials || st.Dropped != 1 {
		t.Errorf("status %+v", st)
	}
}

// Queueing past the bound drops the oldest batches, counted, class
// queue_full; the newest stay.
func TestQueueFullClass(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	e := newExporter(t, nil, func(o *Options) { o.Queue = 3 })
	c := testConfig(t, col, time.Hour)
	for range 5 {
		e.sampleInto(t.Context(), c)
	}
	e.mu.Lock()
	ids := []uint64{}
	for _, b := range e.queue {
		ids = append(ids, b.id)
	}
	e.mu.Unlock()
	if st := e.Status(); st.Dropped != 2 || st.LastErrorClass != ClassQueueFull {
		t.Errorf("status %+v", st)
	}
	if len(ids) != 3 || ids[0] != 3 || ids[2] != 5 {
		t.Errorf("queue ids %v, want [3 4 5]", ids)
	}
}
