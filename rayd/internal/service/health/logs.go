package health

import (
	"context"
	"log/slog"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/logring"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Logs' limits: the default and the most records one call returns.
const (
	defaultLogs = 100
	maxLogs     = 1000
)

// SetLogs sets the ring Logs reads (nil: Logs answers no records). Call it
// before serving.
func (s *Service) SetLogs(r *logring.Ring) { s.logs = r }

// Logs returns rayd's most recent log records, oldest first.
func (s *Service) Logs(_ context.Context, req *connect.Request[raydv1.LogsRequest]) (*connect.Response[raydv1.LogsResponse], error) {
	limit := int(req.Msg.GetLimit())
	switch {
	case limit < 0 || limit > maxLogs:
		return nil, rpcerr.Invalid("limit must be 0 to 1000")
	case limit == 0:
		limit = defaultLogs
	}
	resp := &raydv1.LogsResponse{}
	if s.logs == nil {
		return connect.NewResponse(resp), nil
	}
	var since time.Time
	if ms := req.Msg.GetStartUnixMs(); ms > 0 {
		since = time.UnixMilli(ms)
	}
	entries, dropped := s.logs.Since(since, limit)
	resp.Dropped = dropped
	resp.Entries = make([]*raydv1.LogEntry, len(entries))
	for i, e := range entries {
		resp.Entries[i] = &raydv1.LogEntry{TimeUnixMs: e.Time.UnixMilli(), Level: levelName(e.Level), Message: e.Message, Fields: e.Fields}
	}
	return connect.NewResponse(resp), nil
}

// levelName is debug, info, warn or error.
func levelName(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	}
	return "error"
}
