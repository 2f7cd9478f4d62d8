// Package envdcode serves the plain HTTP API of E2B's code-interpreter
// server (@e2b/code-interpreter) on the code port of the E2B shim, over
// rayd's own code service (package code): the same contexts and Jupyter
// kernels as CodeService, only in E2B's shapes.
//
//	POST   /execute                 run a cell: an NDJSON stream
//	GET    /contexts                list the contexts
//	POST   /contexts                create one {language?, cwd?}
//	DELETE /contexts/{id}           destroy one
//	POST   /contexts/{id}/restart   restart its kernel
//	GET    /health                  200 "OK", as E2B's (no token needed)
//
// A cell whose /execute client goes away (closes the connection, times
// out) before it ends is interrupted at once, as E2B's server does: E2B's
// clients never reattach, and a cell left running would hold its context.
//
// /execute answers one JSON object per line, never a blank line: stdout,
// stderr, result, error, number_of_executions, end_of_execution (and
// keepalive lines during silence, which the SDK ignores as it does every
// unknown type). Errors before the stream are JSON {"code": <status>,
// "message": "..."} with Connect's HTTP status for the cause (404 for an
// unknown context).
package envdcode

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/service/code"
)

// MaxRequestBytes bounds a request body (the code service's own bound on
// a cell is 1 MiB; JSON escaping may double it).
const MaxRequestBytes = 4 << 20

// Handlers serves the endpoints.
type Handlers struct {
	code *code.Service
}

// New returns the endpoints over rayd's code service.
func New(c *code.Service) *Handlers { return &Handlers{code: c} }

// Routes returns the handlers by mux pattern, for apiserver's Extra.
func (h *Handlers) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"/health":                     http.HandlerFunc(health),
		"POST /execute":               http.HandlerFunc(h.execute),
		"GET /contexts":               http.HandlerFunc(h.listContexts),
		"POST /contexts":              http.HandlerFunc(h.createContext),
		"DELETE /contexts/{id}":       http.HandlerFunc(h.destroyContext),
		"POST /contexts/{id}/restart": http.HandlerFunc(h.restartContext),
	}
}

// health answers as E2B's code-interpreter server does (200, the JSON
// string "OK"): programs probe it from inside the sandbox (curl
// localhost:49999/health) and wait for 200.
func health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", "4")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, `"OK"`)
}

func fail(w http.ResponseWriter, err error) { rpcerr.WriteEnvdHTTP(w, 0, err) }

// decode reads a JSON body into v (an empty body leaves v as it is).
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		fail(w, rpcerr.Invalid("request body too large or unreadable"))
		return false
	}
	if len(b) == 0 {
		return true
	}
	if err := json.Unmarshal(b, v); err != nil {
		fail(w, rpcerr.Invalid("request body is not the expected JSON"))
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		fail(w, rpcerr.New(raydv1.ErrorReason_ERROR_REASON_INTERNAL, "cannot encode the answer"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Context is a code context as the SDK reads it.
type Context struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Cwd      string `json:"cwd"`
}

func contextOf(c *raydv1.CodeContext) Context {
	return Context{ID: c.GetContextId(), Language: c.GetLanguage(), Cwd: c.GetCwd()}
}

func (h *Handlers) listContexts(w http.ResponseWriter, r *http.Request) {
	resp, err := h.code.ListContexts(r.Context(), connect.NewRequest(&raydv1.ListContextsRequest{}))
	if err != nil {
		fail(w, err)
		return
	}
	out := make([]Context, 0, len(resp.Msg.GetContexts()))
	for _, c := range resp.Msg.GetContexts() {
		out = append(out, contextOf(c))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handlers) createContext(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Language string  `json:"language"`
		Cwd      *string `json:"cwd"`
	}
	if !decode(w, r, &body) {
		return
	}
	resp, err := h.code.CreateContext(r.Context(), connect.NewRequest(&raydv1.CreateContextRequest{Language: body.Language, Cwd: body.Cwd}))
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, contextOf(resp.Msg.GetContext()))
}

func (h *Handlers) destroyContext(w http.ResponseWriter, r *http.Request) {
	if _, err := h.code.DestroyContext(r.Context(), connect.NewRequest(&raydv1.DestroyContextRequest{ContextId: r.PathValue("id")})); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *Handlers) restartContext(w http.ResponseWriter, r *http.Request) {
	if _, err := h.code.RestartContext(r.Context(), connect.NewRequest(&raydv1.RestartContextRequest{ContextId: r.PathValue("id")})); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ExecuteRequest is POST /execute's body.
type ExecuteRequest struct {
	Code      string            `json:"code"`
	ContextID *string           `json:"context_id"`
	Language  *string           `json:"language"`
	EnvVars   map[string]string `json:"env_vars"`
}

func (h *Handlers) execute(w http.ResponseWriter, r *http.Request) {
	var body ExecuteRequest
	if !decode(w, r, &body) {
		return
	}
	m := &raydv1.ExecuteRequest{Code: body.Code, ContextId: body.ContextID, Language: body.Language, Envs: body.EnvVars}
	if m.ContextId != nil && *m.ContextId == "" {
		m.ContextId = nil
	}
	if m.Language != nil && *m.Language == "" {
		m.Language = nil
	}
	if m.ContextId != nil && m.Language != nil {
		// The SDK sends one or the other; a context names its language.
		m.Language = nil
	}
	out := &ndjson{w: w}
	err := h.code.ExecuteTo(r.Context(), m, code.ExecuteOptions{InterruptOnDrop: true}, out.event)
	if err == nil || r.Context().Err() != nil {
		return
	}
	if !out.started {
		fail(w, err)
		return
	}
	_, msg := rpcerr.Classify(err)
	_ = out.line(map[string]any{"type": "error", "name": "StreamError", "value": msg, "traceback": ""})
}

// ndjson writes the stream's lines.
type ndjson struct {
	w       http.ResponseWriter
	started bool
}

func (n *ndjson) line(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if !n.started {
		n.started = true
		h := n.w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		n.w.WriteHeader(http.StatusOK)
	}
	b = append(b, '\n')
	if _, err := n.w.Write(b); err != nil {
		return err
	}
	return http.NewResponseController(n.w).Flush()
}

// event renders one of rayd's execution events as the SDK's lines.
func (n *ndjson) event(ev *raydv1.ExecuteEvent) error {
	switch e := ev.GetEvent().(type) {
	case *raydv1.ExecuteEvent_Started:
		return n.line(map[string]any{"type": "number_of_executions", "execution_count": e.Started.GetExecutionCount()})
	case *raydv1.ExecuteEvent_Stdout:
		return n.line(map[string]any{"type": "stdout", "text": e.Stdout.GetText(), "timestamp": e.Stdout.GetTimestampUnixNs()})
	case *raydv1.ExecuteEvent_Stderr:
		return n.line(map[string]any{"type": "stderr", "text": e.Stderr.GetText(), "timestamp": e.Stderr.GetTimestampUnixNs()})
	case *raydv1.ExecuteEvent_Result:
		return n.line(result(e.Result))
	case *raydv1.ExecuteEvent_Error:
		return n.line(map[string]any{"type": "error", "name": e.Error.GetName(), "value": e.Error.GetValue(), "traceback": e.Error.GetTraceback()})
	case *raydv1.ExecuteEvent_Timeout:
		return n.line(map[string]any{"type": "error", "name": "TimeoutError", "value": "the execution timed out", "traceback": ""})
	case *raydv1.ExecuteEvent_StreamError:
		return n.line(map[string]any{"type": "error", "name": "StreamError", "value": e.StreamError.GetMessage(), "traceback": ""})
	case *raydv1.ExecuteEvent_End:
		return n.line(map[string]any{"type": "end_of_execution"})
	case *raydv1.ExecuteEvent_Keepalive:
		return n.line(map[string]any{"type": "keepalive"})
	}
	return nil
}

// result renders a rich result as E2B's server does: its formats as the
// SDKs name them, JSON formats (json, chart, data) as JSON values, its
// text as e2bText gives it, and every other MIME type in "extra" (always
// there, {} when none; a JSON type's value, application/...+json, as a
// JSON value), which E2B's Python SDK reads as Result.extra and its JS
// SDK keeps in Result.raw.
func result(r *raydv1.ExecutionResult) map[string]any {
	extra := map[string]any{}
	for k, v := range r.GetExtra() {
		if strings.HasSuffix(k, "json") && (strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[")) && json.Valid([]byte(v)) {
			extra[k] = json.RawMessage(v)
		} else {
			extra[k] = v
		}
	}
	out := map[string]any{"type": "result", "is_main_result": r.GetIsMainResult(), "extra": extra}
	str := func(k string, v *string) {
		if v != nil {
			out[k] = *v
		}
	}
	raw := func(k string, v *string) {
		if v == nil {
			return
		}
		if json.Valid([]byte(*v)) {
			out[k] = json.RawMessage(*v)
		} else {
			out[k] = *v
		}
	}
	if r.Text != nil {
		out["text"] = e2bText(*r.Text)
	}
	str("html", r.Html)
	str("markdown", r.Markdown)
	str("latex", r.Latex)
	str("javascript", r.Javascript)
	str("png", r.Png)
	str("jpeg", r.Jpeg)
	str("svg", r.Svg)
	str("pdf", r.Pdf)
	raw("json", r.Json)
	raw("chart", r.Chart)
	raw("data", r.Data)
	return out
}

// e2bText is a result's text/plain as E2B's code-interpreter server sends
// it: the quotes of a Python string's repr taken off ('bar' reads bar,
// as os.getenv('FOO') does in E2B), any other text as it is.
func e2bText(s string) string {
	if len(s) >= 2 && (s[0] == '\'' && s[len(s)-1] == '\'' || s[0] == '"' && s[len(s)-1] == '"') {
		return s[1 : len(s)-1]
	}
	return s
}
