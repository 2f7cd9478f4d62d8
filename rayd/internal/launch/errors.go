package launch

import (
	"errors"
	"io/fs"
)

// Sentinel errors of the launch policy. Compare with [errors.Is]; the
// errors returned by Builder wrap them in an *Error with a fixed message.
// rpcerr maps each to its Connect code and ErrorInfo reason.
var (
	// ErrInvalid: a request field breaks the rules (empty cmd, NUL bytes,
	// too many args, bad env name, cwd, tag, timeout, shell, size, user).
	ErrInvalid = errors.New("launch: invalid request")
	// ErrExecutableNotFound: the command or shell is not on PATH.
	ErrExecutableNotFound = errors.New("launch: executable not found")
	// ErrNotExecutable: only candidates the user may not execute exist.
	ErrNotExecutable = errors.New("launch: executable not permitted")
	// ErrCwdNotFound: the requested (or the sandbox's) working directory
	// is not an existing directory.
	ErrCwdNotFound = errors.New("launch: working directory not found")
	// ErrUserDenied: the account may not run processes (identity rules, or
	// rayd without root and another account).
	ErrUserDenied = errors.New("launch: user not allowed")
	// ErrAccounts: the account database could not be read.
	ErrAccounts = errors.New("launch: cannot read the account database")
)

// Error is a launch refusal: a sentinel plus a fixed message that never
// holds user data (paths, commands, envs), so it may be sent to a client.
type Error struct {
	Err error
	Msg string
}

func (e *Error) Error() string { return "launch: " + e.Msg }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// PublicMessage is the fixed message for the client.
func (e *Error) PublicMessage() string { return e.Msg }

func fail(sentinel error, msg string) error { return &Error{Err: sentinel, Msg: msg} }

// lookPathErr tells a missing executable from one the user may not run.
func lookPathErr(err error, msg string) error {
	if errors.Is(err, fs.ErrPermission) {
		return fail(ErrNotExecutable, "executable not permitted")
	}
	return fail(ErrExecutableNotFound, msg)
}
