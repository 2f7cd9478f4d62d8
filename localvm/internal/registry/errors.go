package registry

import (
	"errors"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// Error is an error a caller of the API may see: an exception name of the
// lambda-microvms API (microvmsapi.ValidationException, …) and a message
// that never quotes user input. Every error the registry returns for a
// request it refused is an *Error; anything else is a bug or an I/O
// failure and maps to InternalServerException.
type Error struct {
	// Type is the exception name; its HTTP status is
	// microvmsapi.StatusOf(Type).
	Type string
	// Message is safe to show to the caller.
	Message string
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

// Is makes errors.Is(err, &Error{Type: T}) match any *Error of type T.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Type == e.Type && (t.Message == "" || t.Message == e.Message)
}

// TypeOf returns the exception name of err: its *Error's Type, or
// microvmsapi.InternalServerException.
func TypeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Type
	}
	return microvmsapi.InternalServerException
}

func validationErr(msg string) error {
	return &Error{Type: microvmsapi.ValidationException, Message: msg}
}

func conflictErr(msg string) error {
	return &Error{Type: microvmsapi.ConflictException, Message: msg}
}

// ErrNotFound is returned for a microVM that does not exist (or no longer:
// TERMINATED ones vanish after the retention period).
var ErrNotFound error = &Error{Type: microvmsapi.ResourceNotFoundException, Message: "The microVM does not exist."}

// ErrClosed is returned by every operation once Close has begun.
var ErrClosed error = &Error{Type: microvmsapi.InternalServerException, Message: "The local platform is shutting down."}
