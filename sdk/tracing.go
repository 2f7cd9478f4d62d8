package rayito

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/rayito-dev/rayito/sdk/internal/tokenstore"
)

// tracerName is the instrumentation scope of the SDK's spans.
const tracerName = "github.com/rayito-dev/rayito/sdk"

// Span attribute keys. Spans carry only these: the sandbox id, the
// template, the operation and the result class. Never a command, an
// environment, a path, file contents, code, metadata values, a secret or
// a token.
const (
	AttrSandboxID = attribute.Key("rayito.sandbox.id")
	AttrTemplate  = attribute.Key("rayito.template")
	AttrOperation = attribute.Key("rayito.operation")
	// AttrResult is "ok", or the error's Reason (ReasonOf), "canceled",
	// "deadline_exceeded" or "error".
	AttrResult = attribute.Key("rayito.result")
)

// tracingConfig is WithTracerProvider's.
type tracingConfig struct {
	tracerProvider trace.TracerProvider
}

// WithTracerProvider makes Create, Connect, Kill, Pause, Resume,
// Commands.Run, Files.Read, Files.Write and RunCode record an
// OpenTelemetry span each (named "rayito.<operation>", kind client) with
// the attributes AttrSandboxID, AttrTemplate (Create), AttrOperation and
// AttrResult, and nothing else: no command, environment, path, content,
// code, metadata value, secret or token, and an error's status carries its
// class only. Without it (or with nil) nothing is recorded. A Sandbox
// keeps the provider it was created or connected with.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return sandboxOption(func(c *config) { c.tracerProvider = tp })
}

// span is one operation's span; a nil *span records nothing.
type span struct {
	s trace.Span
}

// startSpan starts op's span when cfg has a tracer provider.
func startSpan(ctx context.Context, cfg *config, op, sandboxID string) (context.Context, *span) {
	if cfg == nil || cfg.tracerProvider == nil {
		return ctx, nil
	}
	attrs := []attribute.KeyValue{AttrOperation.String(op)}
	if sandboxID != "" {
		attrs = append(attrs, AttrSandboxID.String(sandboxID))
	}
	ctx, s := cfg.tracerProvider.Tracer(tracerName, trace.WithInstrumentationVersion(Version)).
		Start(ctx, "rayito."+op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, &span{s: s}
}

// span starts op's span for the sandbox.
func (s *Sandbox) span(ctx context.Context, op string) (context.Context, *span) {
	return startSpan(ctx, s.cfg, op, s.id)
}

// set adds the sandbox id and template once known (Create).
func (sp *span) set(sandboxID, template string) {
	if sp == nil {
		return
	}
	if sandboxID != "" {
		sp.s.SetAttributes(AttrSandboxID.String(sandboxID))
	}
	if template != "" {
		sp.s.SetAttributes(AttrTemplate.String(template))
	}
}

// end records the result class and ends the span.
func (sp *span) end(err error) {
	if sp == nil {
		return
	}
	class := resultClass(err)
	sp.s.SetAttributes(AttrResult.String(class))
	if err != nil {
		sp.s.SetStatus(codes.Error, class)
	}
	sp.s.End()
}

// resultClass is err's closed class: never its text.
func resultClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	var ce *CommandExitError
	if errors.As(err, &ce) {
		return "exit_nonzero"
	}
	if r := ReasonOf(err); r != ReasonUnspecified {
		return string(r)
	}
	return "error"
}

// spanID is id when it is a valid sandbox id ("" otherwise: whatever a
// caller passed as an id stays out of the span).
func spanID(id string) string {
	if !tokenstore.ValidID(id) {
		return ""
	}
	return id
}

// spanID is the sandbox's id; "" for nil.
func (s *Sandbox) spanID() string {
	if s == nil {
		return ""
	}
	return s.id
}
