package rayito

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestAgentSpan: a run's span carries only the operation, the sandbox,
// the result and gen_ai.* attributes (model, provider, runtime, tokens).
func TestAgentSpan(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	c := &agentConfig{runtime: AgentRuntimeOpenCode, spec: AgentSpec{Model: AgentModel{Provider: ProviderOpenAI, ID: "gpt-x"}, Instructions: "secret plan"}}
	_, sp := startAgentSpan(context.Background(), &config{tracingConfig: tracingConfig{tracerProvider: tp}}, "", c)
	sp.endAgent(AgentUsage{InputTokens: 7, OutputTokens: 3}, AgentTokenBudget)
	_, none := startAgentSpan(context.Background(), &config{}, "", c)
	none.endAgent(AgentUsage{}, "")
	spans := sr.Ended()
	if len(spans) != 1 || spans[0].Name() != "rayito.agent" {
		t.Fatalf("spans %v", spans)
	}
	got := map[string]string{}
	for _, kv := range spans[0].Attributes() {
		k := string(kv.Key)
		if !strings.HasPrefix(k, "gen_ai.") && k != string(AttrOperation) && k != string(AttrResult) && k != string(AttrSandboxID) {
			t.Errorf("attribute %s", k)
		}
		got[k] = kv.Value.Emit()
		if strings.Contains(got[k], "secret plan") {
			t.Errorf("%s carries the instructions", k)
		}
	}
	for k, v := range map[string]string{"gen_ai.request.model": "gpt-x", "gen_ai.provider.name": "openai", "gen_ai.agent.name": "opencode",
		"gen_ai.usage.input_tokens": "7", "gen_ai.usage.output_tokens": "3", "rayito.result": "token_budget", "gen_ai.operation.name": "invoke_agent"} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}
