package health

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/metrics"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
)

func reasonOf(t *testing.T, err error) raydv1.ErrorReason {
	t.Helper()
	ce, ok := err.(*connect.Error)
	if !ok {
		t.Fatalf("not a Connect error: %v", err)
	}
	return rpcerr.ReasonOf(ce)
}

func TestMetricsWithoutSampler(t *testing.T) {
	t.Parallel()
	s := New(sandbox.New(sandbox.Options{}), func() uint64 { return 0 }, nil)
	_, err := s.Metrics(context.Background(), connect.NewRequest(&raydv1.MetricsRequest{}))
	if r := reasonOf(t, err); r != raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED {
		t.Fatalf("Metrics: %v", err)
	}
	_, err = s.MetricsHistory(context.Background(), connect.NewRequest(&raydv1.MetricsHistoryRequest{}))
	if r := reasonOf(t, err); r != raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED {
		t.Fatalf("MetricsHistory: %v", err)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	s := New(sandbox.New(sandbox.Options{}), func() uint64 { return 0 }, nil)
	m := metrics.New(metrics.Options{Interval: 10 * time.Millisecond, MemoryLimit: 1 << 40, Processes: func() int { return 3 }})
	s.SetMetrics(m)
	ctx := context.Background()
	history := func(req *raydv1.MetricsHistoryRequest) (*raydv1.MetricsHistoryResponse, error) {
		resp, err := s.MetricsHistory(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return resp.Msg, nil
	}

	if h, err := history(&raydv1.MetricsHistoryRequest{}); err != nil || len(h.GetSamples()) != 0 || h.GetOldestUnixMs() != 0 {
		t.Fatalf("before any sample: %v, %v", h, err)
	}
	resp, err := s.Metrics(ctx, connect.NewRequest(&raydv1.MetricsRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	// The processes are every one the scan sees but rayd (this test), not
	// the supervised count.
	if r := resp.Msg; r.GetCpuCount() == 0 || r.GetMemTotalBytes() != 1<<40 || r.GetMemUsedBytes() == 0 ||
		r.GetTaskCount() == 0 || r.GetProcessCount() != r.GetTaskCount()-1 || r.GetTimestampUnixMs() == 0 || r.GetCpuUsedPct() < 0 || r.GetCpuUsedPct() > 100 {
		t.Fatalf("Metrics: %v", r)
	}

	m.Start()
	defer m.Stop()
	var h *raydv1.MetricsHistoryResponse
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if h, err = history(&raydv1.MetricsHistoryRequest{}); err != nil {
			t.Fatal(err)
		}
		if len(h.GetSamples()) >= 4 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("no history")
		}
	}
	all := h.GetSamples()
	if h.GetOldestUnixMs() != all[0].GetTimestampUnixMs() {
		t.Errorf("oldest %d, first %d", h.GetOldestUnixMs(), all[0].GetTimestampUnixMs())
	}
	for i := 1; i < len(all); i++ {
		if all[i].GetTimestampUnixMs() < all[i-1].GetTimestampUnixMs() {
			t.Fatalf("not ascending at %d", i)
		}
	}
	first, last := all[0].GetTimestampUnixMs(), all[len(all)-1].GetTimestampUnixMs()
	h, err = history(&raydv1.MetricsHistoryRequest{StartUnixMs: first, EndUnixMs: last, MaxPoints: 2})
	if err != nil || len(h.GetSamples()) != 2 || h.GetSamples()[0].GetTimestampUnixMs() != first || h.GetSamples()[1].GetTimestampUnixMs() != last {
		t.Fatalf("max_points 2: %v, %v", h, err)
	}
	if h, err = history(&raydv1.MetricsHistoryRequest{StartUnixMs: last + 1, EndUnixMs: last + 1}); err != nil || len(h.GetSamples()) != 0 {
		t.Fatalf("after the last: %v, %v", h, err)
	}

	for _, bad := range []*raydv1.MetricsHistoryRequest{
		{StartUnixMs: -1},
		{EndUnixMs: -1},
		{MaxPoints: -1},
		{StartUnixMs: 10, EndUnixMs: 9},
	} {
		_, err := history(bad)
		if r := reasonOf(t, err); r != raydv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT || connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%v: %v", bad, err)
		}
	}
	if _, err := history(&raydv1.MetricsHistoryRequest{StartUnixMs: 10}); err != nil {
		t.Errorf("start without an end: %v", err)
	}
}
