package e2b

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// A sandbox's logs are its daemon's: rayd's last records (lifecycle,
// network, kernels, refusals; never a token, env, payload, command or
// secret), read from the running sandbox.

// Logs' limits: the default and the most one answer holds.
const (
	defaultLogLimit = 100
	maxLogLimit     = rayito.MaxLogs
)

type logLineOut struct {
	Timestamp string `json:"timestamp"`
	Line      string `json:"line"`
}

type logEntryOut struct {
	Timestamp string            `json:"timestamp"`
	Level     string            `json:"level"`
	Message   string            `json:"message"`
	Fields    map[string]string `json:"fields"`
}

type logsOut struct {
	Logs       []logLineOut  `json:"logs"`
	LogEntries []logEntryOut `json:"logEntries"`
}

type logsV2Out struct {
	Logs []logEntryOut `json:"logs"`
}

var logLevels = map[string]int{"debug": 0, "info": 1, "warn": 2, "error": 3}

func entryOut(e rayito.LogEntry) logEntryOut {
	f := e.Fields
	if f == nil {
		f = map[string]string{}
	}
	return logEntryOut{Timestamp: rfc3339(e.Time), Level: e.Level, Message: e.Message, Fields: f}
}

// line is a record as one line: its message, then its fields sorted.
func line(e rayito.LogEntry) string {
	var b strings.Builder
	b.WriteString(e.Message)
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, strconv.Quote(e.Fields[k]))
	}
	return b.String()
}

// readLogs reads a running sandbox's records since since (zero: all kept).
func (s *Server) readLogs(w http.ResponseWriter, r *http.Request, since time.Time) ([]rayito.LogEntry, bool) {
	id, ok := s.sandboxID(w, r)
	if !ok {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	_, c, ok := s.running(ctx, w, id, "sandbox %q is paused: its logs are read from it while it runs")
	if !ok {
		return nil, false
	}
	es, err := c.sbx.Logs(ctx, since, maxLogLimit)
	if err != nil {
		writeStatus(w, id, err)
		return nil, false
	}
	return es, true
}

// logQuery reads a logs request's time parameter name (unix
// milliseconds; absent: the zero time) and its limit (absent: 100; at
// most maxLogLimit).
func logQuery(q url.Values, name string) (time.Time, int, error) {
	var at time.Time
	if v := q.Get(name); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return time.Time{}, 0, fmt.Errorf("%s must be unix milliseconds", name)
		}
		at = time.UnixMilli(n)
	}
	limit := defaultLogLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return time.Time{}, 0, fmt.Errorf("limit must be a positive integer")
		}
		limit = min(n, maxLogLimit)
	}
	return at, limit, nil
}

// handleLogs is GET /sandboxes/{id}/logs?start=&limit= (E2B's v1): the
// records at or after start, oldest first, as lines and as entries.
func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request) {
	start, limit, err := logQuery(r.URL.Query(), "start")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	es, ok := s.readLogs(w, r, start)
	if !ok {
		return
	}
	es = es[:min(len(es), limit)]
	out := logsOut{Logs: make([]logLineOut, 0, len(es)), LogEntries: make([]logEntryOut, 0, len(es))}
	for _, e := range es {
		out.Logs = append(out.Logs, logLineOut{Timestamp: rfc3339(e.Time), Line: line(e)})
		out.LogEntries = append(out.LogEntries, entryOut(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// handleLogsV2 is GET /v2/sandboxes/{id}/logs?cursor=&direction=&level=
// &limit=&search=: forward (the default) is the records at or after
// cursor, oldest first; backward the records at or before it (no cursor:
// the newest), newest first; level is the least level, search a
// case-sensitive substring of the message.
func (s *Server) handleLogsV2(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cursor, limit, err := logQuery(q, "cursor")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	backward := false
	switch q.Get("direction") {
	case "", "forward":
	case "backward":
		backward = true
	default:
		writeError(w, http.StatusBadRequest, "direction must be forward or backward")
		return
	}
	least := 0
	if v := q.Get("level"); v != "" {
		l, ok := logLevels[v]
		if !ok {
			writeError(w, http.StatusBadRequest, "level must be debug, info, warn or error")
			return
		}
		least = l
	}
	search := q.Get("search")
	since := cursor
	if backward {
		since = time.Time{}
	}
	es, ok := s.readLogs(w, r, since)
	if !ok {
		return
	}
	if backward {
		slices.Reverse(es)
	}
	out := logsV2Out{Logs: []logEntryOut{}}
	for _, e := range es {
		if len(out.Logs) == limit {
			break
		}
		if backward && !cursor.IsZero() && e.Time.After(cursor) || logLevels[e.Level] < least || !strings.Contains(e.Message, search) {
			continue
		}
		out.Logs = append(out.Logs, entryOut(e))
	}
	writeJSON(w, http.StatusOK, out)
}
