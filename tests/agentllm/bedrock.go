package agentllm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

type bedrockRequest struct {
	Messages []json.RawMessage `json:"messages"`
	System   json.RawMessage   `json:"system"`
}

// serveBedrock answers Bedrock's Converse (JSON) and ConverseStream (AWS's
// binary event stream, application/vnd.amazon.eventstream) for the model
// in the path (percent-encoded by the AWS SDKs).
func (s *Script) serveBedrock(w http.ResponseWriter, r *http.Request, rawModel string, stream bool) {
	model, err := url.PathUnescape(rawModel)
	if err != nil {
		model = rawModel
	}
	var req bedrockRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 32<<20)).Decode(&req); err != nil {
		w.Header().Set("x-amzn-ErrorType", "ValidationException")
		http.Error(w, `{"message":"bad json"}`, http.StatusBadRequest)
		return
	}
	raw, _ := json.Marshal(req.Messages)
	authorized := s.keyIn(r, "Authorization", "Bearer ")
	turn, n, ok := s.take(Request{Provider: ProviderBedrock, Authorized: authorized, Stream: stream, Model: model,
		Messages: len(req.Messages), Body: string(req.System) + string(raw)})
	if !authorized || !ok {
		kind, status := "AccessDeniedException", http.StatusForbidden
		if authorized {
			kind, status = "InternalServerException", http.StatusInternalServerError
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-amzn-ErrorType", kind)
		w.WriteHeader(status)
		fmt.Fprint(w, `{"message":"refused"}`)
		return
	}
	stop := "end_turn"
	if len(turn.Calls) > 0 {
		stop = "tool_use"
	}
	usage := map[string]int{"inputTokens": turn.PromptTokens, "outputTokens": turn.CompletionTokens, "totalTokens": turn.PromptTokens + turn.CompletionTokens}
	callID := func(i int) string { return fmt.Sprintf("tooluse_%d_%d", n, i) }
	if !stream {
		var content []map[string]any
		if turn.Text != "" {
			content = append(content, map[string]any{"text": turn.Text})
		}
		for i, c := range turn.Calls {
			args := c.Args
			if args == nil {
				args = map[string]any{}
			}
			content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": callID(i), "name": c.Name, "input": args}})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"output": map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
			"stopReason": stop, "usage": usage, "metrics": map[string]int{"latencyMs": 1}})
		return
	}
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	fl, _ := w.(http.Flusher)
	enc := eventstream.NewEncoder()
	send := func(event string, v any) {
		payload, _ := json.Marshal(v)
		var h eventstream.Headers
		h.Set(":event-type", eventstream.StringValue(event))
		h.Set(":content-type", eventstream.StringValue("application/json"))
		h.Set(":message-type", eventstream.StringValue("event"))
		_ = enc.Encode(w, eventstream.Message{Headers: h, Payload: payload})
		if fl != nil {
			fl.Flush()
		}
	}
	send("messageStart", map[string]any{"role": "assistant"})
	block := 0
	if turn.Text != "" {
		for _, piece := range splitWords(turn.Text) {
			send("contentBlockDelta", map[string]any{"contentBlockIndex": block, "delta": map[string]any{"text": piece}})
		}
		send("contentBlockStop", map[string]any{"contentBlockIndex": block})
		block++
	}
	for i, c := range turn.Calls {
		send("contentBlockStart", map[string]any{"contentBlockIndex": block, "start": map[string]any{"toolUse": map[string]any{"toolUseId": callID(i), "name": c.Name}}})
		send("contentBlockDelta", map[string]any{"contentBlockIndex": block, "delta": map[string]any{"toolUse": map[string]any{"input": argsJSON(c)}}})
		send("contentBlockStop", map[string]any{"contentBlockIndex": block})
		block++
	}
	send("messageStop", map[string]any{"stopReason": stop})
	send("metadata", map[string]any{"usage": usage, "metrics": map[string]int{"latencyMs": 1}})
}
