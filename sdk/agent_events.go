package rayito

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// AgentEventType is the kind of an AgentEvent. The set is closed; later
// versions may add types.
type AgentEventType string

// The event types.
const (
	// AgentEventStepStarted: the model was asked for a step (Step).
	AgentEventStepStarted AgentEventType = "step_started"
	// AgentEventTextDelta: a piece of the step's text as it streams (Text).
	AgentEventTextDelta AgentEventType = "text_delta"
	// AgentEventText: the step's whole text (Text).
	AgentEventText AgentEventType = "text"
	// AgentEventReasoning: the model's reasoning for the step, when the model
	// returns it (Text).
	AgentEventReasoning AgentEventType = "reasoning"
	// AgentEventToolCall: a tool the agent called (ToolCall; Status started)
	// and then its outcome (Status completed or failed, Output).
	AgentEventToolCall AgentEventType = "tool_call"
	// AgentEventStepFinished: the step's answer is complete (Usage: its
	// tokens).
	AgentEventStepFinished AgentEventType = "step_finished"
	// AgentEventFailed: the run ended without finishing (Reason); the same
	// element of the iterator carries the *AgentError.
	AgentEventFailed AgentEventType = "agent_failed"
	// AgentEventDone: the run finished (Result).
	AgentEventDone AgentEventType = "done"
)

// AgentUsage is a count of model tokens.
type AgentUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Total is input plus output tokens.
func (u AgentUsage) Total() int64 { return u.InputTokens + u.OutputTokens }

// AgentToolCall is one tool call of the agent.
type AgentToolCall struct {
	ID   string
	Name string
	// Input is the tool's arguments as the model gave them (JSON), on the
	// started event.
	Input json.RawMessage
	// Status is started, completed or failed.
	Status string
	// Output is the start of the tool's result (at most 4 KiB), on the
	// completed or failed event.
	Output string
}

// AgentResult is a finished run.
type AgentResult struct {
	// Text is the agent's last text.
	Text string
	// Steps is the number of model steps.
	Steps int
	// Usage is the tokens of all steps.
	Usage AgentUsage
	// Runtime is the runtime that ran it and RuntimeVersion its version
	// (from the template's manifest).
	Runtime        AgentRuntime
	RuntimeVersion string
}

// AgentEvent is one event of a run (Agent.Stream).
type AgentEvent struct {
	Type AgentEventType
	// Step is the model step the event belongs to (1, 2, ...).
	Step int
	// Text is the text of text, text_delta and reasoning events.
	Text string
	// ToolCall is the call of a tool_call event.
	ToolCall *AgentToolCall
	// Usage is a step_finished event's tokens.
	Usage AgentUsage
	// Reason is an agent_failed event's reason.
	Reason AgentReason
	// Result is a done event's result.
	Result *AgentResult
}

// errAgentEvent is an event line the SDK cannot read.
var errAgentEvent = errors.New("invalid agent event")

// agentLine is the wire form of one runner event (one JSON object a
// line).
type agentLine struct {
	Type   string          `json:"type"`
	Step   *int            `json:"step"`
	Text   *string         `json:"text"`
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input"`
	Status string          `json:"status"`
	Output string          `json:"output"`
	Usage  *AgentUsage     `json:"usage"`
	Reason string          `json:"reason"`
	Steps  int             `json:"steps"`
}

// maxAgentLine bounds one event line.
const maxAgentLine = 1 << 20

// parseAgentEvent reads one event line of a runner. Anything but a
// well-formed event of a known type is errAgentEvent.
func parseAgentEvent(line []byte) (AgentEvent, error) {
	if len(line) > maxAgentLine {
		return AgentEvent{}, fmt.Errorf("%w: line too long", errAgentEvent)
	}
	var l agentLine
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&l); err != nil {
		return AgentEvent{}, fmt.Errorf("%w: not JSON", errAgentEvent)
	}
	if dec.More() {
		return AgentEvent{}, fmt.Errorf("%w: trailing data", errAgentEvent)
	}
	step := 0
	if l.Step != nil {
		step = *l.Step
	}
	if step < 0 || step > 1<<20 || l.Steps < 0 || l.Steps > 1<<20 {
		return AgentEvent{}, fmt.Errorf("%w: step out of range", errAgentEvent)
	}
	if l.Usage != nil && (l.Usage.InputTokens < 0 || l.Usage.OutputTokens < 0) {
		return AgentEvent{}, fmt.Errorf("%w: negative usage", errAgentEvent)
	}
	ev := AgentEvent{Type: AgentEventType(l.Type), Step: step}
	text := func() error {
		if l.Text == nil {
			return fmt.Errorf("%w: %s without text", errAgentEvent, l.Type)
		}
		ev.Text = *l.Text
		return nil
	}
	switch ev.Type {
	case AgentEventStepStarted:
		if step < 1 {
			return AgentEvent{}, fmt.Errorf("%w: step_started without a step", errAgentEvent)
		}
	case AgentEventTextDelta, AgentEventText, AgentEventReasoning:
		if err := text(); err != nil {
			return AgentEvent{}, err
		}
	case AgentEventToolCall:
		switch l.Status {
		case "started", "completed", "failed":
		default:
			return AgentEvent{}, fmt.Errorf("%w: tool_call status", errAgentEvent)
		}
		tc := &AgentToolCall{ID: l.ID, Name: l.Name, Status: l.Status, Output: l.Output}
		if len(l.Input) > 0 && !bytes.Equal(l.Input, []byte("null")) {
			tc.Input = append(json.RawMessage(nil), l.Input...)
		}
		ev.ToolCall = tc
	case AgentEventStepFinished:
		if l.Usage != nil {
			ev.Usage = *l.Usage
		}
	case AgentEventFailed:
		ev.Reason = AgentReason(l.Reason)
		if !knownAgentReason(ev.Reason) {
			return AgentEvent{}, fmt.Errorf("%w: unknown reason", errAgentEvent)
		}
	case AgentEventDone:
		res := &AgentResult{Steps: l.Steps}
		if l.Text != nil {
			res.Text = *l.Text
		}
		if l.Usage != nil {
			res.Usage = *l.Usage
		}
		ev.Result = res
	default:
		return AgentEvent{}, fmt.Errorf("%w: unknown type", errAgentEvent)
	}
	return ev, nil
}
