package rayito

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
)

// The attributes of an agent run's span (OpenTelemetry's gen_ai semantic
// conventions), beside AttrOperation ("agent"), AttrSandboxID and
// AttrResult (ok or the AgentReason). Never the task, the instructions,
// the model's text, tool input or output.
const (
	AttrGenAIOperation    = attribute.Key("gen_ai.operation.name")
	AttrGenAIProvider     = attribute.Key("gen_ai.provider.name")
	AttrGenAIRequestModel = attribute.Key("gen_ai.request.model")
	AttrGenAIAgentName    = attribute.Key("gen_ai.agent.name")
	AttrGenAIInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	AttrGenAIOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
)

// startAgentSpan starts a run's span ("rayito.agent") when the sandbox
// has a tracer provider (WithTracerProvider).
func startAgentSpan(ctx context.Context, cfg *config, sandboxID string, c *agentConfig) (context.Context, *span) {
	ctx, sp := startSpan(ctx, cfg, "agent", sandboxID)
	if sp != nil {
		sp.s.SetAttributes(AttrGenAIOperation.String("invoke_agent"), AttrGenAIProvider.String(string(c.spec.Model.Provider)),
			AttrGenAIRequestModel.String(c.spec.Model.ID), AttrGenAIAgentName.String(string(c.runtime)))
	}
	return ctx, sp
}

// endAgent records the run's tokens and result and ends the span.
func (sp *span) endAgent(usage AgentUsage, reason AgentReason) {
	if sp == nil {
		return
	}
	sp.s.SetAttributes(AttrGenAIInputTokens.Int64(usage.InputTokens), AttrGenAIOutputTokens.Int64(usage.OutputTokens))
	if reason == "" {
		sp.s.SetAttributes(AttrResult.String("ok"))
	} else {
		sp.s.SetAttributes(AttrResult.String(string(reason)))
		sp.s.SetStatus(codes.Error, string(reason))
	}
	sp.s.End()
}
