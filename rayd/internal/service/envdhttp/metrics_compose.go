package envdhttp

import (
	"encoding/json"
	"io"
	"net/http"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/envduser"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// Metrics is GET /metrics's answer: envd's field names, in bytes and in
// MiB as envd gives both.
type Metrics struct {
	Timestamp   int64   `json:"ts"` // unix seconds
	CPUCount    uint32  `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotal    uint64  `json:"mem_total"`
	MemUsed     uint64  `json:"mem_used"`
	MemCache    uint64  `json:"mem_cache"`
	MemTotalMiB uint64  `json:"mem_total_mib"`
	MemUsedMiB  uint64  `json:"mem_used_mib"`
	DiskTotal   uint64  `json:"disk_total"`
	DiskUsed    uint64  `json:"disk_used"`
}

func (h *Handlers) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	if h.metrics == nil {
		fail(w, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, "metrics are not available"))
		return
	}
	m, err := h.metrics(r.Context())
	if err != nil {
		fail(w, rpcerr.From(err))
		return
	}
	writeJSON(w, Metrics{
		Timestamp: m.UnixMilli / 1000, CPUCount: m.CPUCount, CPUUsedPct: m.CPUPercent,
		MemTotal: m.MemTotal, MemUsed: m.MemUsed, MemCache: m.MemCache,
		MemTotalMiB: m.MemTotal >> 20, MemUsedMiB: m.MemUsed >> 20,
		DiskTotal: m.DiskTotal, DiskUsed: m.DiskUsed,
	})
}

// composeRequest is POST /files/compose's body.
type composeRequest struct {
	Destination string   `json:"destination"`
	SourcePaths []string `json:"source_paths"`
	Username    *string  `json:"username,omitempty"`
}

// maxComposeBody bounds the request: 1000 paths of 4 KiB and a little.
const maxComposeBody = 4<<20 + 64<<10

func (h *Handlers) compose(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	var req composeRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxComposeBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(w, rpcerr.Invalid("the body must be JSON {destination, source_paths, username}"))
		return
	}
	if req.Destination == "" {
		fail(w, rpcerr.Invalid("destination is required"))
		return
	}
	name := r.URL.Query().Get("username")
	if req.Username != nil {
		name = *req.Username
	}
	if !envduser.Valid(name) {
		fail(w, rpcerr.Invalid("invalid username"))
		return
	}
	u, err := h.files.User(name)
	if err != nil {
		fail(w, err)
		return
	}
	dest, err := h.resolve(u, req.Destination)
	if err != nil {
		fail(w, err)
		return
	}
	sources := make([]string, len(req.SourcePaths))
	for i, sp := range req.SourcePaths {
		if sources[i], err = h.resolve(u, sp); err != nil {
			fail(w, err)
			return
		}
	}
	e, err := h.files.Compose(r.Context(), u, dest, sources)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, written(e))
}
