package health

import (
	"context"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/metrics"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// SetMetrics sets the sampler Metrics and MetricsHistory answer from.
// Call it before serving; without one they answer Unimplemented.
func (s *Service) SetMetrics(m *metrics.Sampler) { s.metrics = m }

// Fixed messages of Metrics and MetricsHistory.
const (
	msgNoMetrics    = "metrics are not available in this rayd"
	msgHistoryRange = "start_unix_ms, end_unix_ms and max_points must not be negative, and start_unix_ms must not be after a non-zero end_unix_ms"
)

// Metrics takes a fresh sample of the sandbox (see package metrics).
func (s *Service) Metrics(ctx context.Context, _ *connect.Request[raydv1.MetricsRequest]) (*connect.Response[raydv1.MetricsResponse], error) {
	if s.metrics == nil {
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, msgNoMetrics)
	}
	smp, err := s.metrics.Current(ctx)
	if err != nil {
		return nil, rpcerr.From(err)
	}
	return connect.NewResponse(metricsResponse(smp)), nil
}

// MetricsHistory returns the background samples (every 5 s, the last 8 h)
// within [start_unix_ms, end_unix_ms] (0: no bound), ascending, evenly
// thinned to max_points (0: all).
func (s *Service) MetricsHistory(_ context.Context, req *connect.Request[raydv1.MetricsHistoryRequest]) (*connect.Response[raydv1.MetricsHistoryResponse], error) {
	if s.metrics == nil {
		return nil, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, msgNoMetrics)
	}
	start, end, maxPoints := req.Msg.GetStartUnixMs(), req.Msg.GetEndUnixMs(), req.Msg.GetMaxPoints()
	if start < 0 || end < 0 || maxPoints < 0 || (end != 0 && start > end) {
		return nil, rpcerr.Invalid(msgHistoryRange)
	}
	samples, oldest := s.metrics.History(start, end, int(maxPoints))
	resp := &raydv1.MetricsHistoryResponse{
		Samples:      make([]*raydv1.MetricsResponse, len(samples)),
		OldestUnixMs: oldest,
	}
	for i, smp := range samples {
		resp.Samples[i] = metricsResponse(smp)
	}
	return connect.NewResponse(resp), nil
}

func metricsResponse(smp metrics.Sample) *raydv1.MetricsResponse {
	return &raydv1.MetricsResponse{
		CpuUsedPct:      smp.CPUPercent,
		CpuCount:        smp.CPUCount,
		MemUsedBytes:    smp.MemUsed,
		MemTotalBytes:   smp.MemTotal,
		MemCacheBytes:   smp.MemCache,
		DiskUsedBytes:   smp.DiskUsed,
		DiskTotalBytes:  smp.DiskTotal,
		TimestampUnixMs: smp.UnixMilli,
		ProcessCount:    smp.Processes,
		TaskCount:       smp.Tasks,
	}
}
