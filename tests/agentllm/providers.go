package agentllm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Provider is the wire API a request used.
type Provider string

// The providers the fake speaks.
const (
	// ProviderOpenAI is POST /v1/chat/completions, key in Authorization
	// (Bearer).
	ProviderOpenAI Provider = "openai"
	// ProviderAzure is Azure OpenAI's chat completions at
	// /openai/v1/chat/completions or
	// /openai/deployments/DEPLOYMENT/chat/completions (the deployment is
	// the model), key in api-key.
	ProviderAzure Provider = "azure"
	// ProviderAnthropic is POST /v1/messages, key in x-api-key.
	ProviderAnthropic Provider = "anthropic"
	// ProviderGoogle is Gemini's POST
	// /v1beta/models/MODEL:generateContent and :streamGenerateContent,
	// key in x-goog-api-key.
	ProviderGoogle Provider = "google"
	// ProviderBedrock is Bedrock's POST /model/MODEL/converse and
	// /model/MODEL/converse-stream, key in Authorization (Bearer).
	ProviderBedrock Provider = "bedrock"
)

// serveProvider answers the requests of the providers other than OpenAI
// and reports whether it did.
func (s *Script) serveProvider(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	p := r.URL.Path
	switch {
	case p == "/openai/v1/chat/completions":
		s.serveChat(w, r, s.keyIn(r, "api-key", ""), ProviderAzure)
	case strings.HasPrefix(p, "/openai/deployments/") && strings.HasSuffix(p, "/chat/completions"):
		dep := strings.TrimSuffix(strings.TrimPrefix(p, "/openai/deployments/"), "/chat/completions")
		if dep == "" || strings.Contains(dep, "/") {
			return false
		}
		s.serveChat(w, withModel(r, dep), s.keyIn(r, "api-key", ""), ProviderAzure)
	case p == "/v1/messages":
		s.serveAnthropic(w, r)
	case strings.HasPrefix(p, "/v1beta/models/"):
		model, op, ok := strings.Cut(strings.TrimPrefix(p, "/v1beta/models/"), ":")
		if !ok || model == "" || (op != "generateContent" && op != "streamGenerateContent") {
			return false
		}
		s.serveGemini(w, r, model, op == "streamGenerateContent")
	case strings.HasPrefix(p, "/model/"):
		rest := strings.TrimPrefix(p, "/model/")
		i := strings.LastIndexByte(rest, '/')
		if i <= 0 || (rest[i+1:] != "converse" && rest[i+1:] != "converse-stream") {
			return false
		}
		s.serveBedrock(w, r, rest[:i], rest[i+1:] == "converse-stream")
	default:
		return false
	}
	return true
}

// keyIn reports whether r carries the script's key in header (after
// prefix); any request does when the script has no key.
func (s *Script) keyIn(r *http.Request, header, prefix string) bool {
	return s.Key == "" || r.Header.Get(header) == prefix+s.Key
}

// withModel returns r with its JSON body's model set to model (Azure's
// deployment paths carry the model in the path, not the body).
func withModel(r *http.Request, model string) *http.Request {
	var body map[string]any
	if err := json.NewDecoder(io.LimitReader(r.Body, 32<<20)).Decode(&body); err != nil {
		body = nil
	}
	if body != nil {
		body["model"] = model
	}
	raw, _ := json.Marshal(body)
	r2 := r.Clone(r.Context())
	r2.Body = readCloser{strings.NewReader(string(raw))}
	return r2
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }

// deny answers 401 (no key) or 500 (script used up) in a provider's error
// shape; it reports whether it answered.
func deny(w http.ResponseWriter, authorized, ok bool) bool {
	switch {
	case !authorized:
		http.Error(w, `{"error":{"type":"authentication_error","message":"no key"}}`, http.StatusUnauthorized)
	case !ok:
		http.Error(w, `{"error":{"type":"api_error","message":"script exhausted"}}`, http.StatusInternalServerError)
	default:
		return false
	}
	return true
}

// sseWriter writes server-sent events, flushed one by one.
type sseWriter struct {
	w  http.ResponseWriter
	fl http.Flusher
}

func newSSE(w http.ResponseWriter) *sseWriter {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	return &sseWriter{w: w, fl: fl}
}

// send writes one event (name may be empty) with v as JSON data.
func (e *sseWriter) send(name string, v any) {
	b, _ := json.Marshal(v)
	if name != "" {
		fmt.Fprintf(e.w, "event: %s\n", name)
	}
	fmt.Fprintf(e.w, "data: %s\n\n", b)
	if e.fl != nil {
		e.fl.Flush()
	}
}

// argsJSON is a tool call's arguments as JSON text.
func argsJSON(c ToolCall) string {
	if c.Args == nil {
		return "{}"
	}
	b, _ := json.Marshal(c.Args)
	return string(b)
}
