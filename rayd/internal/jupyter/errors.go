package jupyter

import "errors"

// Sentinel errors; rpcerr maps them to answers.
var (
	// ErrDied is returned when the kernel process ended (or never
	// answered) while a request was pending.
	ErrDied = errors.New("kernel: the kernel died")
	// ErrNotStarted is returned when the kernel could not be started or
	// did not answer kernel_info in time.
	ErrNotStarted = errors.New("kernel: the kernel did not start")
	// ErrClosed is returned by calls on a kernel that was shut down.
	ErrClosed = errors.New("kernel: the kernel was shut down")
	// ErrNotOwnChild is returned when /proc does not confirm that the
	// kernel's pid is still rayd's own child of the expected uid, started
	// when the kernel was (T12): rayd then signals nothing.
	ErrNotOwnChild = errors.New("kernel: the pid is not rayd's own kernel")
)

// Errors of the code contexts (service/code), mapped by rpcerr.
var (
	// ErrTooManyContexts refuses a context beyond the cap of 8 kernels.
	ErrTooManyContexts = errors.New("kernel: too many contexts")
	// ErrContextNotFound is an unknown context id.
	ErrContextNotFound = errors.New("kernel: no such context")
	// ErrDefaultContext refuses to destroy a default context.
	ErrDefaultContext = errors.New("kernel: a default context cannot be destroyed")
	// ErrExecutionNotFound is an unknown or no longer retained execution.
	ErrExecutionNotFound = errors.New("kernel: no such execution")
	// ErrTruncated is a from_seq whose events are no longer held.
	ErrTruncated = errors.New("kernel: events at from_seq are no longer held")
	// ErrUnavailable is a language whose kernel is not installed; the
	// error's PublicMessage names what is missing.
	ErrUnavailable = errors.New("kernel: the language's kernel is not installed")
)

// MissingError is ErrUnavailable naming what is missing.
type MissingError struct{ Missing string }

func (e *MissingError) Error() string { return "kernel: not installed: " + e.Missing }

// Unwrap returns ErrUnavailable.
func (e *MissingError) Unwrap() error { return ErrUnavailable }

// PublicMessage is the fixed message rpcerr sends.
func (e *MissingError) PublicMessage() string {
	return e.Missing + " is not installed in this image"
}
