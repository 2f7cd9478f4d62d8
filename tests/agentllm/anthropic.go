package agentllm

import (
	"encoding/json"
	"fmt"
	"net/http"
)

type anthropicRequest struct {
	Model    string            `json:"model"`
	System   json.RawMessage   `json:"system"`
	Messages []json.RawMessage `json:"messages"`
	Stream   bool              `json:"stream"`
}

// serveAnthropic answers Anthropic's Messages API (POST /v1/messages),
// streamed as its server-sent events or not.
func (s *Script) serveAnthropic(w http.ResponseWriter, r *http.Request) {
	var req anthropicRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20)).Decode(&req); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	raw, _ := json.Marshal(req.Messages)
	authorized := s.keyIn(r, "x-api-key", "")
	turn, n, ok := s.take(Request{Provider: ProviderAnthropic, Authorized: authorized, Stream: req.Stream, Model: req.Model,
		Messages: len(req.Messages), Body: string(req.System) + string(raw)})
	if deny(w, authorized, ok) {
		return
	}
	id := fmt.Sprintf("msg_%d", n)
	stop := "end_turn"
	if len(turn.Calls) > 0 {
		stop = "tool_use"
	}
	var blocks []map[string]any
	if turn.Text != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": turn.Text})
	}
	for i, c := range turn.Calls {
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d_%d", n, i), "name": c.Name, "input": args})
	}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "type": "message", "role": "assistant", "model": req.Model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]int{"input_tokens": turn.PromptTokens, "output_tokens": turn.CompletionTokens}})
		return
	}
	e := newSSE(w)
	e.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message", "role": "assistant",
		"model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": turn.PromptTokens, "output_tokens": 0}}})
	for i, b := range blocks {
		if b["type"] == "text" {
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, piece := range splitWords(turn.Text) {
				e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": piece}})
			}
		} else {
			e.send("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(b["input"])
			e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		}
		e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": turn.CompletionTokens}})
	e.send("message_stop", map[string]any{"type": "message_stop"})
}
