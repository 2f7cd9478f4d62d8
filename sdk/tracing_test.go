package rayito

import (
	"context"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

const (
	secretEnv   = "env-SECRET-canary-88af"
	secretCmd   = "echo cmd-canary-19bd"
	secretMeta  = "meta-canary-77cc"
	secretPath  = "/home/user/path-canary-3e1f"
	traceWanted = "rayito.Create rayito.Commands.Run rayito.Files.Read rayito.Pause rayito.Resume rayito.Kill rayito.Connect rayito.Kill"
)

// Spans carry the operation, the sandbox id, the template and the result
// class, and no secret: not an env value, the telemetry token, the
// command, a path or a metadata value.
func TestTracerProviderSpans(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	withConfigure(p, &fakeConfigure{answer: applied})
	p.proc.start = func(s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(5))
		_ = s.Send(data(1, "out"))
		return s.Send(endEv(3))
	}
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx := t.Context()
	sbx, err := Create(ctx, p.opts(t, WithTracerProvider(tp), WithEnvs(map[string]string{"API_KEY": secretEnv}),
		WithMetadata(map[string]string{"owner": secretMeta}), WithTelemetry(testExport()))...)
	if err != nil {
		t.Fatal(err)
	}
	var exit *CommandExitError
	if _, err := sbx.Commands.Run(ctx, secretCmd, WithEnvs(map[string]string{"X": secretEnv})); !errors.As(err, &exit) {
		t.Fatalf("Run = %v", err)
	}
	_, _ = sbx.Files.Read(ctx, secretPath) // no file endpoint in the fake: an error
	if err := sbx.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sbx.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sbx.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := Connect(ctx, "not a valid id "+secretEnv, p.opts(t, WithTracerProvider(tp))...); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Connect = %v", err)
	}
	if err := Kill(ctx, fakeID, p.opts(t, WithTracerProvider(tp))...); err != nil {
		t.Fatal(err)
	}

	spans := sr.Ended()
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	if strings.Join(names, " ") != traceWanted {
		t.Fatalf("spans %q", names)
	}
	want := []map[string]string{
		{"rayito.operation": "Create", "rayito.sandbox.id": fakeID, "rayito.result": "ok"},
		{"rayito.operation": "Commands.Run", "rayito.sandbox.id": fakeID, "rayito.result": "exit_nonzero"},
		{"rayito.operation": "Files.Read", "rayito.sandbox.id": fakeID},
		{"rayito.operation": "Pause", "rayito.sandbox.id": fakeID, "rayito.result": "ok"},
		{"rayito.operation": "Resume", "rayito.sandbox.id": fakeID, "rayito.result": "ok"},
		{"rayito.operation": "Kill", "rayito.sandbox.id": fakeID, "rayito.result": "ok"},
		{"rayito.operation": "Connect", "rayito.result": string(ReasonInvalidArgument)},
		{"rayito.operation": "Kill", "rayito.sandbox.id": fakeID, "rayito.result": "ok"},
	}
	allowed := map[string]bool{"rayito.operation": true, "rayito.sandbox.id": true, "rayito.template": true, "rayito.result": true}
	for i, s := range spans {
		got := map[string]string{}
		for _, kv := range s.Attributes() {
			if !allowed[string(kv.Key)] {
				t.Errorf("%s: unexpected attribute %s", s.Name(), kv.Key)
			}
			got[string(kv.Key)] = kv.Value.Emit()
			for _, secret := range []string{secretEnv, telemetryToken, secretCmd, secretMeta, secretPath, "cmd-canary", "path-canary"} {
				if strings.Contains(kv.Value.Emit(), secret) {
					t.Errorf("%s: attribute %s carries a secret", s.Name(), kv.Key)
				}
			}
		}
		if strings.Contains(s.Status().Description, "canary") || len(s.Events()) != 0 {
			t.Errorf("%s: status %v, events %v", s.Name(), s.Status(), s.Events())
		}
		for k, v := range want[i] {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", s.Name(), k, got[k], v)
			}
		}
		if s.SpanKind() != trace.SpanKindClient || s.InstrumentationScope().Name != tracerName {
			t.Errorf("%s: kind %v scope %q", s.Name(), s.SpanKind(), s.InstrumentationScope().Name)
		}
	}
	if r := spans[2].Attributes(); len(r) < 3 {
		t.Errorf("Files.Read attributes %v", r)
	}
}

// Without a provider nothing is recorded and nothing breaks.
func TestNoTracerProvider(t *testing.T) {
	t.Parallel()
	ctx, sp := startSpan(t.Context(), &config{}, "Create", fakeID)
	if sp != nil || trace.SpanFromContext(ctx).SpanContext().IsValid() {
		t.Fatal("a span without a provider")
	}
	sp.set("x", "y")
	sp.end(errors.New("e"))
}
