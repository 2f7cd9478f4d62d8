package rayito

import (
	"context"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// Metrics is one sample of a sandbox's resource use, as its daemon
// measures it. Sizes are in bytes.
type Metrics struct {
	// Time is when the sample was taken (the sandbox's clock).
	Time time.Time
	// CPUPercent is the CPU used over the last interval, as a percentage
	// of all of the sandbox's CPUs (0 to 100).
	CPUPercent float64
	CPUCount   int
	MemUsed    uint64
	MemTotal   uint64
	// MemCache is page cache, which MemUsed does not count.
	MemCache  uint64
	DiskUsed  uint64
	DiskTotal uint64
	// Processes counts every process in the sandbox but its daemon: the
	// commands, terminals and kernels it started and all their
	// descendants, background ones that outlived their command included.
	// (A daemon older than this SDK counted only the commands and
	// terminals it supervises.)
	Processes int
	// Tasks counts the same processes and the daemon; 0 when the daemon
	// cannot see them.
	Tasks int
}

func metricsOf(m *raydv1.MetricsResponse) Metrics {
	out := Metrics{
		CPUPercent: m.GetCpuUsedPct(), CPUCount: int(m.GetCpuCount()),
		MemUsed: m.GetMemUsedBytes(), MemTotal: m.GetMemTotalBytes(), MemCache: m.GetMemCacheBytes(),
		DiskUsed: m.GetDiskUsedBytes(), DiskTotal: m.GetDiskTotalBytes(),
		Processes: int(m.GetProcessCount()), Tasks: int(m.GetTaskCount()),
	}
	if ms := m.GetTimestampUnixMs(); ms > 0 {
		out.Time = time.UnixMilli(ms)
	}
	return out
}

// Metrics measures the sandbox's resource use now. Like every call to its
// daemon it reaches a paused sandbox's endpoint (see SetTimeout).
func (s *Sandbox) Metrics(ctx context.Context) (*Metrics, error) {
	resp, err := s.dp.health.Metrics(ctx, connect.NewRequest(&raydv1.MetricsRequest{}))
	if err != nil {
		return nil, rpcErr("metrics", err)
	}
	m := metricsOf(resp.Msg)
	return &m, nil
}

// MetricsHistory returns the samples rayd took every 5 s of the last 8
// hours the sandbox ran, oldest first, from from to to (a zero time is no
// bound), at most maxPoints of them (evenly thinned; 0 is no limit).
// There are no samples for the time it was paused.
func (s *Sandbox) MetricsHistory(ctx context.Context, from, to time.Time, maxPoints int) ([]Metrics, error) {
	req := &raydv1.MetricsHistoryRequest{}
	if !from.IsZero() {
		req.StartUnixMs = from.UnixMilli()
	}
	if !to.IsZero() {
		req.EndUnixMs = to.UnixMilli()
	}
	switch {
	case maxPoints < 0 || maxPoints > 1<<31-1:
		return nil, newError(ReasonInvalidArgument, "the number of metrics samples must be 0 (no limit) or more")
	case req.StartUnixMs < 0 || req.EndUnixMs < 0:
		return nil, newError(ReasonInvalidArgument, "metrics history bounds must be after 1970")
	case !from.IsZero() && !to.IsZero() && from.After(to):
		return nil, newError(ReasonInvalidArgument, "the metrics history starts after it ends")
	}
	req.MaxPoints = int32(maxPoints)
	resp, err := s.dp.health.MetricsHistory(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcErr("metrics history", err)
	}
	out := make([]Metrics, 0, len(resp.Msg.GetSamples()))
	for _, m := range resp.Msg.GetSamples() {
		out = append(out, metricsOf(m))
	}
	return out, nil
}
