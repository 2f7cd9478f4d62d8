package rayito

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/compat"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// APIError is a control-plane error (AWS Lambda MicroVMs or localvm). It
// never carries the service's raw message.
type APIError = microvms.APIError

// Sentinels for errors.Is.
var (
	// ErrNotFound: the sandbox, or the process, does not exist.
	ErrNotFound = errors.New("rayito: not found")
	// ErrNotReady: the sandbox did not become ready in time.
	ErrNotReady = errors.New("rayito: sandbox not ready")
	// ErrSandboxEnded: the sandbox is terminating or terminated.
	ErrSandboxEnded = errors.New("rayito: sandbox ended")
	// ErrInvalidArgument: an option or argument was refused before any call.
	ErrInvalidArgument = errors.New("rayito: invalid argument")
	// ErrIncompatibleAgent: the sandbox's daemon (rayd) is a version this
	// SDK cannot drive (see *IncompatibleAgentError).
	ErrIncompatibleAgent = errors.New("rayito: incompatible sandbox agent")
)

// IncompatibleAgentError is returned by Create and Connect when the
// sandbox's daemon reports a version (Health's agent_version) this SDK
// cannot drive, according to the table of proto/compat. AgentVersion is
// as rayd reported it ("" for none), cut to 128 bytes. errors.Is(err,
// ErrIncompatibleAgent) matches it; Err is the cause from proto/compat
// (a *compat.IncompatibleError, or an error wrapping
// compat.ErrInvalidVersion when the version does not parse).
type IncompatibleAgentError struct {
	SDKVersion   string
	AgentVersion string
	Err          error
}

func (e *IncompatibleAgentError) Error() string {
	var ie *compat.IncompatibleError
	switch {
	case e.AgentVersion == "":
		return fmt.Sprintf("rayito: SDK %s cannot drive this sandbox: its agent reports no version", e.SDKVersion)
	case errors.As(e.Err, &ie):
		return fmt.Sprintf("rayito: SDK %s cannot drive this sandbox's agent %s: %s", e.SDKVersion, e.AgentVersion, ie.Reason)
	case errors.Is(e.Err, compat.ErrInvalidVersion):
		return fmt.Sprintf("rayito: SDK %s cannot drive this sandbox: its agent reports a malformed version %q", e.SDKVersion, e.AgentVersion)
	default:
		return fmt.Sprintf("rayito: SDK %s cannot check this sandbox's agent %q: %v", e.SDKVersion, e.AgentVersion, e.Err)
	}
}

// Is lets errors.Is(err, ErrIncompatibleAgent) match.
func (e *IncompatibleAgentError) Is(target error) bool { return target == ErrIncompatibleAgent }

// Unwrap returns the cause from proto/compat.
func (e *IncompatibleAgentError) Unwrap() error { return e.Err }

// RPCError is an error from the sandbox's daemon (rayd). Code is the
// Connect/gRPC code; Message is rayd's fixed message.
type RPCError struct {
	Op      string
	Code    connect.Code
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("rayito: %s: %s: %s", e.Op, e.Code, e.Message)
}

// Is lets errors.Is(err, ErrNotFound) match a NotFound RPC.
func (e *RPCError) Is(target error) bool {
	return target == ErrNotFound && e.Code == connect.CodeNotFound
}

// rpcErr wraps a Connect error from rayd.
func rpcErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return &RPCError{Op: op, Code: ce.Code(), Message: ce.Message()}
	}
	return fmt.Errorf("rayito: %s: %w", op, err)
}

// CommandExitError is returned by Commands.Run and CommandHandle.Wait when
// the command ended with a non-zero exit code (or by a signal); the full
// result is attached.
type CommandExitError struct {
	Result *CommandResult
}

func (e *CommandExitError) Error() string {
	if e.Result.Status != "" && e.Result.Status != "exited" {
		return fmt.Sprintf("rayito: command ended (%s) with exit code %d", e.Result.Status, e.Result.ExitCode)
	}
	return fmt.Sprintf("rayito: command exited with code %d", e.Result.ExitCode)
}
