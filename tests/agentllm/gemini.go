package agentllm

import (
	"encoding/json"
	"net/http"
)

type geminiRequest struct {
	Contents          []json.RawMessage `json:"contents"`
	SystemInstruction json.RawMessage   `json:"systemInstruction"`
}

// serveGemini answers the Gemini API's generateContent and
// streamGenerateContent (server-sent events with alt=sse, else a JSON
// array) for model.
func (s *Script) serveGemini(w http.ResponseWriter, r *http.Request, model string, stream bool) {
	var req geminiRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20)).Decode(&req); err != nil {
		http.Error(w, `{"error":{"code":400,"message":"bad json","status":"INVALID_ARGUMENT"}}`, http.StatusBadRequest)
		return
	}
	raw, _ := json.Marshal(req.Contents)
	authorized := s.keyIn(r, "x-goog-api-key", "")
	turn, _, ok := s.take(Request{Provider: ProviderGoogle, Authorized: authorized, Stream: stream, Model: model,
		Messages: len(req.Contents), Body: string(req.SystemInstruction) + string(raw)})
	if deny(w, authorized, ok) {
		return
	}
	usage := map[string]int{"promptTokenCount": turn.PromptTokens, "candidatesTokenCount": turn.CompletionTokens,
		"totalTokenCount": turn.PromptTokens + turn.CompletionTokens}
	response := func(parts []map[string]any, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		out := map[string]any{"candidates": []any{cand}, "modelVersion": model}
		if last {
			cand["finishReason"] = "STOP"
			out["usageMetadata"] = usage
		}
		return out
	}
	var calls []map[string]any
	for _, c := range turn.Calls {
		args := c.Args
		if args == nil {
			args = map[string]any{}
		}
		calls = append(calls, map[string]any{"functionCall": map[string]any{"name": c.Name, "args": args}})
	}
	if !stream {
		parts := calls
		if turn.Text != "" {
			parts = append([]map[string]any{{"text": turn.Text}}, calls...)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(response(parts, true))
		return
	}
	var chunks []map[string]any
	for _, piece := range splitWords(turn.Text) {
		chunks = append(chunks, response([]map[string]any{{"text": piece}}, false))
	}
	if len(calls) > 0 {
		chunks = append(chunks, response(calls, true))
	} else if len(chunks) > 0 {
		chunks[len(chunks)-1] = response([]map[string]any{{"text": lastWord(turn.Text)}}, true)
	} else {
		chunks = append(chunks, response([]map[string]any{{"text": ""}}, true))
	}
	if r.URL.Query().Get("alt") != "sse" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(chunks)
		return
	}
	e := newSSE(w)
	for _, c := range chunks {
		e.send("", c)
	}
}

// lastWord is the last piece splitWords cuts text into.
func lastWord(text string) string {
	p := splitWords(text)
	return p[len(p)-1]
}
