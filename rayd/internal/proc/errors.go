package proc

import "errors"

// Sentinel errors. Compare with [errors.Is]; the errors returned by this
// package may wrap them with more context.
var (
	// ErrTooManyProcesses is returned by Start when Options.MaxLive
	// processes are already live.
	ErrTooManyProcesses = errors.New("proc: too many live processes")
	// ErrNotFound is returned by Get for an unknown (or no longer retained)
	// pid, and wrapped by Start and LookPath when the executable does not
	// exist (those errors also match fs.ErrNotExist).
	ErrNotFound = errors.New("proc: not found")
	// ErrTooManySubscribers is returned by Subscribe when
	// Options.MaxSubscribers subscriptions already follow the process.
	ErrTooManySubscribers = errors.New("proc: too many subscribers")
	// ErrOutOfRange is returned by Subscribe when the requested sequence
	// number is no longer retained or lies beyond the next one.
	ErrOutOfRange = errors.New("proc: sequence number out of range")
	// ErrProcessEnded is returned by operations that need a running process.
	ErrProcessEnded = errors.New("proc: process has ended")
	// ErrStdinNotEnabled is returned by WriteStdin and CloseStdin when the
	// process was started without Spec.Stdin.
	ErrStdinNotEnabled = errors.New("proc: stdin not enabled")
	// ErrStdinClosed is returned by WriteStdin after CloseStdin, or when the
	// child closed its end of the pipe.
	ErrStdinClosed = errors.New("proc: stdin closed")
	// ErrNotPTY is returned by WriteInput and Resize on a process started
	// without Spec.PTY.
	ErrNotPTY = errors.New("proc: not a PTY")
	// ErrInvalidSize is returned by Resize for a zero column or row count.
	ErrInvalidSize = errors.New("proc: invalid terminal size")
	// ErrShuttingDown is returned by Start once Shutdown has been called.
	ErrShuttingDown = errors.New("proc: supervisor is shutting down")
)

// errUnsupported is returned on platforms other than Linux.
var errUnsupported = errors.New("proc: process supervision is only supported on Linux")

// startError is a Start or LookPath failure. Its message never contains the
// path, arguments or environment of the command (they are user data and the
// message may end up in logs); the causes are available through errors.Is.
type startError struct {
	op   string // "start" or "lookpath"
	msg  string
	errs []error
}

func (e *startError) Error() string { return "proc: " + e.op + ": " + e.msg }

func (e *startError) Unwrap() []error { return e.errs }

func newStartError(msg string, errs ...error) error {
	return &startError{op: "start", msg: msg, errs: errs}
}

func newLookPathError(msg string, errs ...error) error {
	return &startError{op: "lookpath", msg: msg, errs: errs}
}
