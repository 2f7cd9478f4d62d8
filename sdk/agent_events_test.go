package rayito

import (
	"bufio"
	"errors"
	"path"
	"strings"
	"testing"
)

func TestParseAgentEvent(t *testing.T) {
	good := map[string]AgentEventType{
		`{"type":"step_started","step":1}`:           AgentEventStepStarted,
		`{"type":"text_delta","step":1,"text":"a "}`: AgentEventTextDelta,
		`{"type":"text","step":1,"text":""}`:         AgentEventText,
		`{"type":"reasoning","step":2,"text":"why"}`: AgentEventReasoning,
		`{"type":"tool_call","step":1,"id":"c","name":"execute","input":{"command":"ls"},"status":"started"}`: AgentEventToolCall,
		`{"type":"tool_call","step":1,"id":"c","name":"execute","status":"completed","output":"x"}`:           AgentEventToolCall,
		`{"type":"step_finished","step":1,"usage":{"input_tokens":3,"output_tokens":4}}`:                      AgentEventStepFinished,
		`{"type":"agent_failed","reason":"busy"}`:                                                             AgentEventFailed,
		`{"type":"done","text":"ok","steps":3,"usage":{"input_tokens":1,"output_tokens":2}}`:                  AgentEventDone,
	}
	for line, want := range good {
		ev, err := parseAgentEvent([]byte(line))
		if err != nil || ev.Type != want {
			t.Errorf("%s: %+v %v", line, ev, err)
		}
	}
	ev, _ := parseAgentEvent([]byte(`{"type":"step_finished","step":1,"usage":{"input_tokens":3,"output_tokens":4}}`))
	if ev.Usage.Total() != 7 {
		t.Errorf("usage %+v", ev.Usage)
	}
	for _, line := range []string{
		``, `null`, `[]`, `{"type":"nope"}`, `{"type":"step_started"}`, `{"type":"text","step":1}`,
		`{"type":"tool_call","status":"weird"}`, `{"type":"agent_failed","reason":"made_up"}`,
		`{"type":"step_started","step":-1}`, `{"type":"step_finished","usage":{"input_tokens":-1}}`,
		`{"type":"text","text":"a"} {}`, `{"type":"done","steps":-2}`,
	} {
		if _, err := parseAgentEvent([]byte(line)); !errors.Is(err, errAgentEvent) {
			t.Errorf("%q: %v", line, err)
		}
	}
}

func TestReadAgentLine(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader("a\n"+strings.Repeat("x", 100<<10)+"\nlast"), 16)
	for _, want := range []int{1, 100 << 10, 4} {
		l, err := readAgentLine(r)
		if len(l) != want {
			t.Fatalf("line of %d, want %d (%v)", len(l), want, err)
		}
	}
	r = bufio.NewReaderSize(strings.NewReader(strings.Repeat("x", maxAgentLine+2)), 4096)
	if _, err := readAgentLine(r); !errors.Is(err, errAgentLineTooLong) {
		t.Errorf("long line: %v", err)
	}
}

func TestAgentErrors(t *testing.T) {
	err := error(&AgentError{Reason: AgentBusy})
	var ae *AgentError
	if !errors.Is(err, ErrAgent) || !errors.As(err, &ae) || ae.Reason != AgentBusy {
		t.Errorf("%v", err)
	}
	if u := error(&UnimplementedError{Feature: "x"}); !errors.Is(u, ErrUnimplemented) {
		t.Errorf("%v", u)
	}
	for r := range agentMessages {
		if !strings.Contains((&AgentError{Reason: r}).Error(), string(r)) {
			t.Errorf("%s", r)
		}
	}
}

// FuzzAgentEvents: no event line panics the parser, and what it accepts
// has a known type and, for agent_failed, a known reason.
func FuzzAgentEvents(f *testing.F) {
	for _, s := range []string{
		`{"type":"step_started","step":1}`, `{"type":"tool_call","status":"started","input":{"a":1}}`,
		`{"type":"done","text":"x","steps":1,"usage":{"input_tokens":1}}`, `{"type":"agent_failed","reason":"timeout"}`,
		`{"type":"text","text":"\u0000"}`, `{`, `{"type":"text","text":"a"}{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := parseAgentEvent(line)
		if err != nil {
			if !errors.Is(err, errAgentEvent) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		switch ev.Type {
		case AgentEventStepStarted, AgentEventTextDelta, AgentEventText, AgentEventReasoning, AgentEventStepFinished:
		case AgentEventToolCall:
			if ev.ToolCall == nil {
				t.Fatal("tool_call without a call")
			}
		case AgentEventFailed:
			if !knownAgentReason(ev.Reason) {
				t.Fatalf("reason %q", ev.Reason)
			}
		case AgentEventDone:
			if ev.Result == nil {
				t.Fatal("done without a result")
			}
		default:
			t.Fatalf("type %q", ev.Type)
		}
	})
}

// FuzzAgentManifest: no manifest panics its reader, and what it accepts
// is a runner under /opt/agents with a sha256.
func FuzzAgentManifest(f *testing.F) {
	f.Add([]byte(`{"v":1,"runtimes":{"deepagents":{"version":"1.14.1","runner":"/opt/agents/deepagents/runner.mjs","runner_sha256":"`+strings.Repeat("a", 64)+`"}}}`), "")
	f.Add([]byte(`{"v":1,"runtimes":{"deepagents":{"runner":"/opt/agents/../etc/x"}}}`), "1")
	f.Add([]byte(`[]`), "")
	f.Fuzz(func(t *testing.T, raw []byte, want string) {
		rt, reason := parseAgentManifest(raw, AgentRuntimeDeepAgents, want)
		if reason != "" {
			if !knownAgentReason(reason) {
				t.Fatalf("reason %q", reason)
			}
			return
		}
		if !strings.HasPrefix(rt.Runner, "/opt/agents/") || path.Clean(rt.Runner) != rt.Runner || len(rt.RunnerSHA256) != 64 || (want != "" && rt.Version != want) {
			t.Fatalf("accepted %+v", rt)
		}
	})
}
