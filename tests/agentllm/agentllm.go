// Package agentllm is a scripted OpenAI-compatible model for the agent
// tests: it answers POST /v1/chat/completions (streamed as server-sent
// events or not) with the next turn of a script, tool calls or text, with
// token usage. It also speaks Azure OpenAI's, Anthropic's, Gemini's and
// Bedrock's wire APIs (providers.go), dispatched on the path, so one
// Script serves every provider. It is the tests' only fake: no real model
// is reachable from the test machines.
package agentllm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// ToolCall is a tool the scripted model asks for.
type ToolCall struct {
	Name string
	Args map[string]any
}

// Turn is one answer of the model: tool calls, or final text when Calls is
// empty. Usage is its token usage (prompt, completion).
type Turn struct {
	Text             string
	Calls            []ToolCall
	PromptTokens     int
	CompletionTokens int
}

// Script answers requests with its turns in order; once they are used up
// it repeats the last one when Loop is set, else answers 500.
type Script struct {
	Turns []Turn
	Loop  bool
	// Key, when set, is the key every request must carry in its
	// provider's header (401 otherwise): the one the secret gateway
	// injects.
	Key string

	mu       sync.Mutex
	next     int
	served   int
	requests []Request
}

// Request is what the model saw of one request.
type Request struct {
	// Provider is the API the request used.
	Provider   Provider
	Authorized bool
	Stream     bool
	Model      string
	Messages   int
	Body       string
}

// take records req and returns the next turn (ok false once the script is
// used up) and the request's number.
func (s *Script) take(req Request) (turn Turn, n int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	ok = true
	switch {
	case s.next < len(s.Turns):
		turn = s.Turns[s.next]
		s.next++
	case s.Loop && len(s.Turns) > 0:
		turn = s.Turns[len(s.Turns)-1]
	default:
		ok = false
	}
	s.served++
	return turn, s.served, ok
}

// Requests returns the requests seen so far.
func (s *Script) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

type chatRequest struct {
	Model         string            `json:"model"`
	Messages      []json.RawMessage `json:"messages"`
	Stream        bool              `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// ServeHTTP answers /v1/chat/completions, and the other providers' APIs
// (see Provider) at their paths.
func (s *Script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.serveProvider(w, r) {
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
		return
	}
	s.serveChat(w, r, s.Key == "" || r.Header.Get("Authorization") == "Bearer "+s.Key, ProviderOpenAI)
}

// serveChat answers an OpenAI chat completion (OpenAI's path or Azure's).
func (s *Script) serveChat(w http.ResponseWriter, r *http.Request, authorized bool, provider Provider) {
	var req chatRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20)).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	raw, _ := json.Marshal(req.Messages)
	turn, n, ok := s.take(Request{Provider: provider, Authorized: authorized, Stream: req.Stream, Model: req.Model, Messages: len(req.Messages), Body: string(raw)})
	if !authorized {
		http.Error(w, `{"error":{"message":"no key"}}`, http.StatusUnauthorized)
		return
	}
	if !ok {
		http.Error(w, `{"error":{"message":"script exhausted"}}`, http.StatusInternalServerError)
		return
	}
	id := fmt.Sprintf("chatcmpl-%d", n)
	usage := map[string]int{"prompt_tokens": turn.PromptTokens, "completion_tokens": turn.CompletionTokens, "total_tokens": turn.PromptTokens + turn.CompletionTokens}
	var calls []map[string]any
	for i, c := range turn.Calls {
		args, _ := json.Marshal(c.Args)
		calls = append(calls, map[string]any{"index": i, "id": fmt.Sprintf("call_%d_%d", n, i), "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": string(args)}})
	}
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
	}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": turn.Text}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, piece := range splitWords(turn.Text) {
		send(chunk(map[string]any{"content": piece}, nil))
	}
	if len(calls) > 0 {
		send(chunk(map[string]any{"tool_calls": calls}, nil))
	}
	send(chunk(map[string]any{}, finish))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1, "model": req.Model, "choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// splitWords cuts text after each space, so deltas arrive word by word.
func splitWords(text string) []string {
	var out []string
	for text != "" {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			out = append(out, text)
			break
		}
		out = append(out, text[:i+1])
		text = text[i+1:]
	}
	return out
}
