package rayito

import (
	"context"
	"maps"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// LogEntry is one record of the sandbox daemon's log: what rayd did
// (lifecycle, network, kernels, refusals), never a token, header, env,
// payload, file content, command or secret.
type LogEntry struct {
	Time    time.Time
	Level   string // debug, info, warn or error
	Message string
	// Fields are the record's attributes as text.
	Fields map[string]string
}

// MaxLogs is the most records one Logs call returns.
const MaxLogs = 1000

// Logs returns the sandbox daemon's most recent log records at or after
// since (the zero time: all it keeps, the last 1024), oldest first, at
// most limit of them (0: 100; at most MaxLogs).
func (s *Sandbox) Logs(ctx context.Context, since time.Time, limit int) ([]LogEntry, error) {
	if limit < 0 || limit > MaxLogs {
		return nil, newError(ReasonInvalidArgument, "the number of log records must be 0 (the default, 100) to 1000")
	}
	req := &raydv1.LogsRequest{Limit: int32(limit)}
	if !since.IsZero() {
		if req.StartUnixMs = since.UnixMilli(); req.StartUnixMs < 0 {
			return nil, newError(ReasonInvalidArgument, "the logs' start must be after 1970")
		}
	}
	resp, err := s.dp.health.Logs(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, rpcErr("logs", err)
	}
	out := make([]LogEntry, 0, len(resp.Msg.GetEntries()))
	for _, e := range resp.Msg.GetEntries() {
		out = append(out, LogEntry{Time: time.UnixMilli(e.GetTimeUnixMs()), Level: e.GetLevel(), Message: e.GetMessage(), Fields: maps.Clone(e.GetFields())})
	}
	return out, nil
}
