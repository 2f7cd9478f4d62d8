package rayito

import (
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	sample := &raydv1.MetricsResponse{CpuUsedPct: 12.5, CpuCount: 4, MemUsedBytes: 1 << 30, MemTotalBytes: 8 << 30, MemCacheBytes: 1 << 20,
		DiskUsedBytes: 2 << 30, DiskTotalBytes: 10 << 30, TimestampUnixMs: 1_800_000_000_000, ProcessCount: 3, TaskCount: 17}
	p.health.metrics = func() (*raydv1.MetricsResponse, error) { return sample, nil }
	var got *raydv1.MetricsHistoryRequest
	p.health.history = func(r *raydv1.MetricsHistoryRequest) (*raydv1.MetricsHistoryResponse, error) {
		got = r
		return &raydv1.MetricsHistoryResponse{Samples: []*raydv1.MetricsResponse{sample, sample}}, nil
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sbx.Metrics(t.Context())
	want := Metrics{Time: time.UnixMilli(1_800_000_000_000), CPUPercent: 12.5, CPUCount: 4, MemUsed: 1 << 30, MemTotal: 8 << 30, MemCache: 1 << 20,
		DiskUsed: 2 << 30, DiskTotal: 10 << 30, Processes: 3, Tasks: 17}
	if err != nil || *m != want {
		t.Fatalf("Metrics = %+v, %v", m, err)
	}
	from := time.UnixMilli(1_700_000_000_000)
	hist, err := sbx.MetricsHistory(t.Context(), from, time.Time{}, 10)
	if err != nil || len(hist) != 2 || hist[1] != want {
		t.Fatalf("MetricsHistory = %+v, %v", hist, err)
	}
	if got.GetStartUnixMs() != from.UnixMilli() || got.GetEndUnixMs() != 0 || got.GetMaxPoints() != 10 {
		t.Fatalf("request %+v", got)
	}
	got = nil
	for _, bad := range []struct {
		from, to time.Time
		n        int
	}{
		{time.Time{}, time.Time{}, -1},
		{from.Add(time.Hour), from, 0},
		{time.Unix(-5, 0), time.Time{}, 0},
	} {
		if _, err := sbx.MetricsHistory(t.Context(), bad.from, bad.to, bad.n); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("MetricsHistory(%v, %v, %d) = %v", bad.from, bad.to, bad.n, err)
		}
	}
	if got != nil {
		t.Fatal("a bad request reached rayd")
	}
	p.health.metrics = func() (*raydv1.MetricsResponse, error) {
		return nil, wireErr(connect.CodeUnauthenticated, raydv1.ErrorReason_ERROR_REASON_UNAUTHENTICATED, "bad token")
	}
	if _, err := sbx.Metrics(t.Context()); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("Metrics = %v", err)
	}
}
