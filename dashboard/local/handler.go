package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/dashboard/internal/session"
	"github.com/rayito-dev/rayito/dashboard/internal/web"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// CSP is the Content-Security-Policy of every answer but the logo.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// LogoCSP is the logo's own policy.
const LogoCSP = "default-src 'none'; style-src 'unsafe-inline'; sandbox"

// CSRFHeader carries the session's CSRF token.
const CSRFHeader = "X-Rayito-CSRF"

func discardLogger() *log.Logger { return log.New(io.Discard, "", 0) }

// securityHeaders go on every answer, errors and 404s included.
func securityHeaders(h http.Header) {
	for k, v := range web.SecurityHeaders(CSP) {
		h.Set(k, v)
	}
}

// Error codes of the API, each with its fixed message.
var messages = map[string]string{
	"payload_too_large":    "the request body is larger than 64 KiB",
	"misdirected_request":  "this host is not the dashboard's",
	"forbidden_origin":     "requests from other origins are refused",
	"unauthenticated":      "no dashboard session: open the URL rayito dashboard printed",
	"cross_site":           "cross-site requests are refused",
	"csrf":                 "a POST needs Content-Type: application/json and the X-Rayito-CSRF header",
	"method_not_allowed":   "method not allowed",
	"not_found":            "not found",
	"invalid_request":      "the request is not valid JSON of the expected shape",
	"invalid_id":           "a sandbox id is not valid",
	"too_many_ids":         "too many sandbox ids in one request",
	"read_only":            "this dashboard is read-only: start it with --allow-actions",
	"confirm_required":     "an action needs \"confirm\": true",
	"unknown_action":       "the action is kill, pause, resume or set_timeout",
	"invalid_timeout":      "the timeout is 1 to 28800 seconds",
	"unknown_account":      "unknown account",
	"read_only_account":    "other accounts are read-only",
	"not_in_read_role":     "other accounts are read through a role that has no logs, events or Cost Explorer",
	"busy":                 "too many actions are waiting: try again",
	"cost_explorer_off":    "billed cost needs rayito dashboard --cost-explorer (on AWS)",
	"cost_budget":          "today's budget of paid Cost Explorer queries is spent",
	"cost_unavailable":     "Cost Explorer has no data for this account yet",
	"cost_throttled":       "Cost Explorer is throttling: try again later",
	"no_logs":              "this platform keeps no logs the dashboard can read (on AWS, see the microVM's CloudWatch logs)",
	"sandbox_not_found":    "sandbox not found",
	"invalid_argument":     "the platform refused an argument",
	"permission_denied":    "the platform denied the call",
	"unauthenticated_aws":  "the platform refused your credentials",
	"platform_unavailable": "the platform does not answer",
	"sandbox_ended":        "the sandbox has ended",
	"no_deadline":          "the sandbox has no deadline to move (it was created without a timeout)",
	"timeout":              "the platform did not answer in time",
	"upstream_error":       "the platform call failed",
}

// apiError writes {"error": {"code", "message"}} with a fixed message.
func apiError(w http.ResponseWriter, status int, code string) {
	msg, ok := messages[code]
	if !ok {
		code, msg = "upstream_error", messages["upstream_error"]
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(data)
	_, _ = w.Write([]byte("\n"))
}

// textError is the short text page of a non-API refusal.
func textError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

func refuse(w http.ResponseWriter, r *http.Request, status int, code string) {
	if isAPI(r.URL.Path) {
		apiError(w, status, code)
		return
	}
	textError(w, status, messages[code])
}

func isAPI(path string) bool { return path == "/api/v1" || strings.HasPrefix(path, "/api/v1/") }

// sessionKey carries the session's CSRF token in a request's context.
type sessionKey struct{}

// Handler is the dashboard's HTTP handler, every rule included.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		// 1. The body cap, before anything reads the request.
		if r.ContentLength > MaxBody {
			w.Header().Set("Connection", "close")
			refuse(w, r, http.StatusRequestEntityTooLarge, "payload_too_large")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				refuse(w, r, http.StatusRequestEntityTooLarge, "payload_too_large")
				return
			}
			refuse(w, r, http.StatusBadRequest, "invalid_request")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		// 2. Host, then Origin.
		switch s.guard.Check(r) {
		case 0:
		case http.StatusMisdirectedRequest:
			refuse(w, r, http.StatusMisdirectedRequest, "misdirected_request")
			return
		default:
			refuse(w, r, http.StatusForbidden, "forbidden_origin")
			return
		}
		// 3. The session: the startup URL, else the cookie.
		if r.URL.Path == "/" && r.URL.Query().Has("token") {
			s.exchange(w, r)
			return
		}
		csrf, ok := s.session.Lookup(r)
		if !ok {
			refuse(w, r, http.StatusUnauthorized, "unauthenticated")
			return
		}
		// 4. Sec-Fetch-Site on the API.
		if isAPI(r.URL.Path) {
			if v := r.Header.Values("Sec-Fetch-Site"); len(v) > 1 || len(v) == 1 && v[0] != "same-origin" && v[0] != "none" {
				apiError(w, http.StatusForbidden, "cross_site")
				return
			}
		}
		// 5. Methods; a POST needs JSON and the CSRF header.
		switch r.Method {
		case http.MethodGet, http.MethodHead:
		case http.MethodPost:
			mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
			if err != nil || mt != "application/json" || len(r.Header.Values(CSRFHeader)) != 1 || !session.CSRFOK(r.Header.Get(CSRFHeader), csrf) {
				refuse(w, r, http.StatusForbidden, "csrf")
				return
			}
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			refuse(w, r, http.StatusMethodNotAllowed, "method_not_allowed")
			return
		}
		s.route(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, csrf)))
	})
}

// exchange spends the startup token for the session cookie and sends
// the browser to the clean URL.
func (s *Server) exchange(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		textError(w, http.StatusMethodNotAllowed, messages["method_not_allowed"])
		return
	}
	c, err := s.session.Exchange(r.URL.Query().Get("token"))
	if err != nil {
		msg := "this dashboard URL is not valid: use the one rayito dashboard printed"
		switch {
		case errors.Is(err, session.ErrSpent):
			msg = "this dashboard URL was already used: restart rayito dashboard for a new one"
		case errors.Is(err, session.ErrExpired):
			msg = "this dashboard URL expired: restart rayito dashboard for a new one"
		}
		textError(w, http.StatusUnauthorized, msg)
		return
	}
	http.SetCookie(w, c)
	w.Header().Set("Location", "/")
	w.WriteHeader(http.StatusSeeOther)
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	get := r.Method == http.MethodGet || r.Method == http.MethodHead
	// ?account=: the caller's own ("" or "default") or a configured
	// label; anything else is refused before any platform call.
	label := ""
	if a, ok := r.URL.Query()["account"]; ok {
		if len(a) != 1 {
			refuse(w, r, http.StatusBadRequest, "unknown_account")
			return
		}
		label = a[0]
	}
	be, ok := s.backendFor(label)
	if !ok {
		refuse(w, r, http.StatusBadRequest, "unknown_account")
		return
	}
	if label == DefaultAccount {
		label = ""
	}
	switch {
	case p == "/theme.css" && get:
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		_, _ = w.Write(s.css)
	case p == "/logo.svg" && get && s.logo != nil:
		w.Header().Set("Content-Security-Policy", LogoCSP)
		w.Header().Set("Content-Type", "image/svg+xml")
		_, _ = w.Write(s.logo)
	case p == "/api/v1/session" && get:
		s.getSession(w, r)
	case p == "/api/v1/sandboxes" && get:
		s.getSandboxes(w, r, label, be)
	case strings.HasPrefix(p, "/api/v1/sandboxes/") && strings.HasSuffix(p, "/logs") && get:
		s.getLogs(w, r, be, strings.TrimSuffix(strings.TrimPrefix(p, "/api/v1/sandboxes/"), "/logs"))
	case p == "/api/v1/events" && get:
		s.getEvents(w, r, be)
	case p == "/api/v1/cost" && get:
		s.getCost(w, r, label, be)
	case p == "/api/v1/actions" && r.Method == http.MethodPost:
		if label != "" {
			// Other accounts are always read-only.
			apiError(w, http.StatusForbidden, "read_only_account")
			return
		}
		s.postActions(w, r)
	case isAPI(p):
		apiError(w, http.StatusNotFound, "not_found")
	case get && web.Has(p):
		web.Serve(w, r, p)
	default:
		textError(w, http.StatusNotFound, messages["not_found"])
	}
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	csrf, _ := r.Context().Value(sessionKey{}).(string)
	writeJSON(w, http.StatusOK, map[string]any{
		"csrf":          csrf,
		"title":         s.theme.Title,
		"logo":          s.logo != nil,
		"backend":       s.opts.Backend,
		"actions":       s.opts.AllowActions,
		"cost_explorer": s.opts.CostExplorer,
		"max_ids":       s.opts.MaxIDs,
		"accounts":      s.accountLabels(),
		"price": map[string]any{
			"usd_per_gib_second": PricePerGiBSecond,
			"basis":              PriceBasis,
		},
	})
}

// callTimeout bounds one read of the platform.
const callTimeout = 20 * time.Second

func (s *Server) getSandboxes(w http.ResponseWriter, r *http.Request, label string, be backend) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	list, err := s.sandboxes(ctx, label, be)
	if err != nil {
		platformError(w, err)
		return
	}
	if list == nil {
		list = []Sandbox{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sandboxes": list, "now": s.now().UTC()})
}

func (s *Server) getLogs(w http.ResponseWriter, r *http.Request, be backend, id string) {
	if !validID(id) {
		apiError(w, http.StatusBadRequest, "invalid_id")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	lines, truncated, err := be.logs(ctx, id)
	switch {
	case errors.Is(err, errReadRole):
		apiError(w, http.StatusNotImplemented, "not_in_read_role")
		return
	case errors.Is(err, errNoLogs):
		apiError(w, http.StatusNotImplemented, "no_logs")
		return
	case err != nil:
		platformError(w, err)
		return
	}
	if lines == nil {
		lines = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "lines": lines, "truncated": truncated})
}

func (s *Server) getEvents(w http.ResponseWriter, r *http.Request, be backend) {
	id := r.URL.Query().Get("sandbox")
	if id != "" && !validID(id) {
		apiError(w, http.StatusBadRequest, "invalid_id")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	evs, err := be.events(ctx, id)
	if errors.Is(err, errReadRole) {
		apiError(w, http.StatusNotImplemented, "not_in_read_role")
		return
	}
	if err != nil {
		platformError(w, err)
		return
	}
	if evs == nil {
		evs = []Event{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": evs})
}

// platformError maps an SDK error to a code: never its text (it could
// carry an AWS message, an ARN or an endpoint).
func platformError(w http.ResponseWriter, err error) {
	status, code := platformCode(err)
	apiError(w, status, code)
}

func platformCode(err error) (int, string) {
	var ended *rayito.SandboxEndedError
	switch {
	case errors.As(err, &ended):
		return http.StatusConflict, "sandbox_ended"
	case errors.Is(err, rayito.ErrLifecycleUnmanaged):
		return http.StatusConflict, "no_deadline"
	case errors.Is(err, rayito.ErrNotFound):
		return http.StatusNotFound, "sandbox_not_found"
	case errors.Is(err, rayito.ErrInvalidArgument):
		return http.StatusBadRequest, "invalid_argument"
	case errors.Is(err, rayito.ErrUnauthenticated):
		return http.StatusBadGateway, "unauthenticated_aws"
	case errors.Is(err, rayito.ErrPermissionDenied):
		return http.StatusForbidden, "permission_denied"
	case errors.Is(err, rayito.ErrPlatformUnavailable):
		return http.StatusServiceUnavailable, "platform_unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "timeout"
	}
	return http.StatusBadGateway, "upstream_error"
}

// validID: a sandbox id as the SDK accepts one.
func validID(id string) bool { return microvmsapi.ValidSandboxID(id) }

// accountLabels are "default" and the other accounts' labels, in the
// order given (never their roles).
func (s *Server) accountLabels() []string {
	out := []string{DefaultAccount}
	for _, a := range s.opts.Accounts {
		out = append(out, a.Label)
	}
	return out
}
