package rayito

import (
	"errors"
	"fmt"
)

// agentDoc is the documentation page of sbx.Agent.
const agentDoc = "docs/agent.md"

// ErrAgent matches every *AgentError.
var ErrAgent = errors.New("rayito: agent run failed")

// AgentReason is why an agent run ended without finishing its task. The
// set is closed; later versions may add reasons.
type AgentReason string

// The reasons.
const (
	// AgentTimeout: the run's timeout (AgentLimits.Timeout) passed.
	AgentTimeout AgentReason = "timeout"
	// AgentMaxSteps: the agent wanted more model steps than
	// AgentLimits.MaxSteps.
	AgentMaxSteps AgentReason = "max_steps"
	// AgentTokenBudget: the steps used more tokens (input and output)
	// than AgentLimits.MaxTokens.
	AgentTokenBudget AgentReason = "token_budget"
	// AgentOutputLimit: the runtime's event stream passed
	// AgentLimits.MaxOutputBytes.
	AgentOutputLimit AgentReason = "output_limit"
	// AgentAborted: the caller's context ended the run.
	AgentAborted AgentReason = "aborted"
	// AgentBusy: another run holds the sandbox (one at a time, whichever
	// process started it).
	AgentBusy AgentReason = "busy"
	// AgentRuntimeMissing: the sandbox has no such runtime (build its
	// template with AgentTemplate).
	AgentRuntimeMissing AgentReason = "runtime_missing"
	// AgentRuntimeMismatch: the runtime's version is not
	// AgentSpec.RuntimeVersion, or its runner is not the one its manifest
	// records.
	AgentRuntimeMismatch AgentReason = "runtime_mismatch"
	// AgentRuntimeFailed: the runtime ended without finishing (a crash,
	// an unreadable event stream).
	AgentRuntimeFailed AgentReason = "runtime_failed"
	// AgentModelError: the model's API answered an error or could not be
	// reached.
	AgentModelError AgentReason = "model_error"
)

// agentMessages are the fixed messages of the reasons: never the agent's
// text, the task or the model's answer.
var agentMessages = map[AgentReason]string{
	AgentTimeout:         "the run's timeout passed",
	AgentMaxSteps:        "the agent used its maximum number of steps",
	AgentTokenBudget:     "the agent used its token budget",
	AgentOutputLimit:     "the agent's output passed its limit",
	AgentAborted:         "the run was aborted",
	AgentBusy:            "another agent run holds the sandbox",
	AgentRuntimeMissing:  "the sandbox has no such agent runtime (build its template with AgentTemplate)",
	AgentRuntimeMismatch: "the sandbox's agent runtime is not the expected one",
	AgentRuntimeFailed:   "the agent runtime failed",
	AgentModelError:      "the model's API failed",
}

// knownAgentReason says whether r is one of the reasons.
func knownAgentReason(r AgentReason) bool { _, ok := agentMessages[r]; return ok }

// AgentError is an agent run that ended without finishing its task.
// errors.Is(err, ErrAgent) matches it; AgentAborted also matches
// context.Canceled when the caller's context was cancelled (Cause).
type AgentError struct {
	Reason AgentReason
	// Cause is an underlying error of the SDK's own (a failed RPC, the
	// context's error), never text from the agent or the model.
	Cause error
}

func (e *AgentError) Error() string {
	msg, ok := agentMessages[e.Reason]
	if !ok {
		msg = "the agent run failed"
	}
	if e.Cause != nil {
		return fmt.Sprintf("rayito: agent %s: %s: %v", e.Reason, msg, e.Cause)
	}
	return fmt.Sprintf("rayito: agent %s: %s", e.Reason, msg)
}

// Is matches ErrAgent.
func (e *AgentError) Is(target error) bool { return target == ErrAgent }

// Unwrap is Cause.
func (e *AgentError) Unwrap() error { return e.Cause }

// UnimplementedError is a feature this version of the SDK does not have
// yet (an agent runtime, an AgentSpec field it cannot honour). It matches
// ErrUnimplemented.
type UnimplementedError struct {
	Feature string
	Reason  string
	// Doc is the page that says what exists instead.
	Doc string
}

func (e *UnimplementedError) Error() string {
	return fmt.Sprintf("rayito: %s is not implemented: %s (see %s)", e.Feature, e.Reason, e.Doc)
}

// Is matches ErrUnimplemented.
func (e *UnimplementedError) Is(target error) bool { return target == ErrUnimplemented }
