package rayito

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"

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
)

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
