package local

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/rayito-dev/rayito/dashboard/internal/session"
	"github.com/rayito-dev/rayito/dashboard/internal/strictjson"
)

// actionRequest is the body of POST /api/v1/actions.
type actionRequest struct {
	Action         string   `json:"action"`
	IDs            []string `json:"ids"`
	Confirm        bool     `json:"confirm"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty"`
}

// ActionResult is one sandbox's outcome.
type ActionResult struct {
	ID    string `json:"id"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// job is one action request waiting for the worker.
type job struct {
	ctx     context.Context
	action  string
	ids     []string
	timeout time.Duration
	done    chan []ActionResult
}

// maxTimeout is the longest sandbox timeout an action sets (8 h).
const maxTimeout = 8 * 60 * 60

func (s *Server) postActions(w http.ResponseWriter, r *http.Request) {
	// Read-only: refused before the body is even decoded.
	if !s.opts.AllowActions {
		apiError(w, http.StatusForbidden, "read_only")
		return
	}
	var req actionRequest
	// Exact keys only: encoding/json alone would take "Confirm" for
	// confirm (strictjson).
	body, err := io.ReadAll(r.Body)
	if err != nil || strictjson.Decode(body, &req) != nil {
		apiError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	if !req.Confirm {
		apiError(w, http.StatusBadRequest, "confirm_required")
		return
	}
	switch req.Action {
	case "kill", "pause", "resume":
		if req.TimeoutSeconds != 0 {
			apiError(w, http.StatusBadRequest, "invalid_request")
			return
		}
	case "set_timeout":
		if req.TimeoutSeconds < 1 || req.TimeoutSeconds > maxTimeout {
			apiError(w, http.StatusBadRequest, "invalid_timeout")
			return
		}
	default:
		apiError(w, http.StatusBadRequest, "unknown_action")
		return
	}
	if len(req.IDs) == 0 {
		apiError(w, http.StatusBadRequest, "invalid_id")
		return
	}
	if len(req.IDs) > s.opts.MaxIDs {
		apiError(w, http.StatusBadRequest, "too_many_ids")
		return
	}
	seen := map[string]bool{}
	for _, id := range req.IDs {
		if !validID(id) || seen[id] {
			apiError(w, http.StatusBadRequest, "invalid_id")
			return
		}
		seen[id] = true
	}
	j := &job{ctx: r.Context(), action: req.Action, ids: req.IDs, timeout: time.Duration(req.TimeoutSeconds) * time.Second, done: make(chan []ActionResult, 1)}
	select {
	case s.queue <- j:
	default:
		apiError(w, http.StatusServiceUnavailable, "busy")
		return
	}
	select {
	case res := <-j.done:
		writeJSON(w, http.StatusOK, map[string]any{"action": req.Action, "results": res})
	case <-r.Context().Done():
	}
}

// worker is the one goroutine that acts on the platform, one call per
// ActionInterval at most, in the order requests came.
func (s *Server) worker(ctx context.Context) {
	var last time.Time
	for {
		var j *job
		select {
		case <-ctx.Done():
			return
		case j = <-s.queue:
		}
		res := make([]ActionResult, 0, len(j.ids))
		for _, id := range j.ids {
			if wait := s.opts.ActionInterval - time.Since(last); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			last = time.Now()
			if j.ctx.Err() != nil {
				// The browser went away: what is left is not done.
				res = append(res, ActionResult{ID: id, Error: "timeout"})
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			var err error
			switch j.action {
			case "kill":
				err = s.be.kill(cctx, id)
			case "pause":
				err = s.be.pause(cctx, id)
			case "resume":
				err = s.be.resume(cctx, id)
			case "set_timeout":
				err = s.be.setTimeout(cctx, id, j.timeout)
			}
			cancel()
			if err != nil {
				_, code := platformCode(err)
				res = append(res, ActionResult{ID: id, Error: code})
				continue
			}
			res = append(res, ActionResult{ID: id, OK: true})
		}
		s.forget()
		j.done <- res
	}
}

// Cost estimate: memory size times running time at a stated rate.
const (
	// PricePerGiBSecond is the rate of the estimate, in USD.
	PricePerGiBSecond = 0.0000133334
	// PriceBasis says where the rate comes from and what is counted.
	PriceBasis = "estimate: memory size (GiB) x time since start (s) x 0.0000133334 USD, AWS Lambda's on-demand arm64 rate per GB-second used as a stand-in for the MicroVMs rate; running and paused sandboxes listed now only (paused time is counted, requests, storage, transfer and ended sandboxes are not); sandboxes of unknown size count as 2 GiB; not your bill"
	// defaultMemBytes is the size assumed when a sandbox's is unknown.
	defaultMemBytes = 2 << 30
)

// CostLine is one sandbox's estimate.
type CostLine struct {
	ID          string  `json:"id"`
	State       string  `json:"state"`
	MemoryBytes uint64  `json:"memory_bytes"`
	SizeKnown   bool    `json:"size_known"`
	Seconds     int64   `json:"seconds"`
	USD         float64 `json:"usd"`
}

func (s *Server) getCost(w http.ResponseWriter, r *http.Request, label string, be backend) {
	if r.URL.Query().Get("billed") == "true" {
		// Cost Explorer bills every query: the CSRF token too, though
		// this is a GET.
		csrf, _ := r.Context().Value(sessionKey{}).(string)
		if len(r.Header.Values(CSRFHeader)) != 1 || !session.CSRFOK(r.Header.Get(CSRFHeader), csrf) {
			apiError(w, http.StatusForbidden, "csrf")
			return
		}
		if label != "" {
			apiError(w, http.StatusNotImplemented, "not_in_read_role")
			return
		}
		if !s.opts.CostExplorer || s.ce == nil {
			apiError(w, http.StatusForbidden, "cost_explorer_off")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
		defer cancel()
		b, err := s.billed(ctx)
		if err != nil {
			billedError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, b)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	list, err := s.sandboxes(ctx, label, be)
	if err != nil {
		platformError(w, err)
		return
	}
	lines := []CostLine{}
	total := 0.0
	for _, sb := range list {
		if sb.State != "RUNNING" && sb.State != "SUSPENDED" && sb.State != "SUSPENDING" && sb.State != "PENDING" || sb.StartedAt == nil {
			continue
		}
		l := CostLine{ID: sb.ID, State: sb.State, MemoryBytes: sb.MemBytes, SizeKnown: sb.MemBytes > 0, Seconds: max(sb.AgeSecs, 0)}
		if !l.SizeKnown {
			l.MemoryBytes = defaultMemBytes
		}
		l.USD = float64(l.MemoryBytes) / (1 << 30) * float64(l.Seconds) * PricePerGiBSecond
		total += l.USD
		lines = append(lines, l)
	}
	writeJSON(w, http.StatusOK, map[string]any{"estimate": true, "basis": PriceBasis, "usd_per_gib_second": PricePerGiBSecond, "total_usd": total, "sandboxes": lines})
}
