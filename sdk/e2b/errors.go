package e2b

import (
	"errors"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// E2B's error names, as sentinels: each is also what rayito's own
// sentinel matches (errors.Is(err, ErrNotFound) and
// errors.Is(err, rayito.ErrNotFound) both hold for a missing sandbox).
var (
	// ErrNotFound: the sandbox, file or process does not exist (E2B's
	// NotFoundError, SandboxNotFoundError, FileNotFoundError).
	ErrNotFound = rayito.ErrNotFound
	// ErrTimeout: a deadline passed (E2B's TimeoutError).
	ErrTimeout = rayito.ErrTimeout
	// ErrInvalidArgument: the request was refused as invalid (E2B's
	// InvalidArgumentError).
	ErrInvalidArgument = rayito.ErrInvalidArgument
	// ErrAuthentication: credentials or the access token were refused
	// (E2B's AuthenticationError).
	ErrAuthentication = rayito.ErrUnauthenticated
	// ErrRateLimit: the platform throttled the call (E2B's RateLimitError).
	ErrRateLimit = errors.New("e2b: rate limited")
	// ErrUnimplemented: an E2B feature Rayito does not have; the error is
	// an *UnimplementedError naming it.
	ErrUnimplemented = errors.New("e2b: not implemented by Rayito")
)

// UnimplementedError is an E2B feature this package does not map onto
// Rayito. Feature is E2B's name for it; Instead, when set, says what to
// use.
type UnimplementedError struct {
	Feature string
	Instead string
}

func (e *UnimplementedError) Error() string {
	msg := "e2b: " + e.Feature + " is not implemented by Rayito"
	if e.Instead != "" {
		msg += ": " + e.Instead
	}
	return msg
}

// Is makes errors.Is(err, ErrUnimplemented) and
// errors.Is(err, rayito.ErrUnimplemented) hold.
func (e *UnimplementedError) Is(target error) bool {
	return target == ErrUnimplemented || target == rayito.ErrUnimplemented
}

func unimplemented(feature, instead string) error {
	return &UnimplementedError{Feature: feature, Instead: instead}
}

// CommandExitError is a command that ended with a non-zero exit code (or
// by a signal or a deadline): E2B's CommandExitError. Its result is
// attached; errors.As(err, new(*rayito.CommandExitError)) holds too.
type CommandExitError struct {
	*CommandResult
	cause error
}

func (e *CommandExitError) Error() string { return e.cause.Error() }
func (e *CommandExitError) Unwrap() error { return e.cause }

// rateLimited adds ErrRateLimit to a rayito error of that reason.
type rateLimited struct{ error }

func (e rateLimited) Unwrap() error        { return e.error }
func (e rateLimited) Is(target error) bool { return target == ErrRateLimit }

// wrap gives rayito's errors E2B's names where they differ, and turns
// rayito's *CommandExitError into this package's.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	var ce *rayito.CommandExitError
	if errors.As(err, &ce) {
		return &CommandExitError{CommandResult: resultOf(ce.Result), cause: err}
	}
	if rayito.ReasonOf(err) == rayito.ReasonRateLimited {
		return rateLimited{err}
	}
	return err
}
