package template

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinels: every error of this package matches one of them with
// errors.Is, and is (or wraps) a *Error.
var (
	// ErrInvalidTemplate: a builder call got a value it cannot use (the
	// *Error names the step and field).
	ErrInvalidTemplate = errors.New("template: invalid template")
	// ErrDockerfile: FromDockerfile met text outside the supported subset
	// (the *Error names the line and instruction).
	ErrDockerfile = errors.New("template: unsupported Dockerfile")
	// ErrContextPath: a Copy source is missing, not under the context,
	// excluded by .dockerignore, or the context cannot be read.
	ErrContextPath = errors.New("template: bad context path")
	// ErrUnsafeSymlink: a symbolic link whose target is absolute or leaves
	// the copied tree, or a link in the path of a Copy source.
	ErrUnsafeSymlink = errors.New("template: symbolic link refused")
	// ErrSpecialFile: a device, fifo or socket in what a Copy names.
	ErrSpecialFile = errors.New("template: special file refused")
	// ErrContextTooLarge: the copied files exceed the size or count limit.
	ErrContextTooLarge = errors.New("template: build context too large")
)

// Error is one error of the builder, of FromDockerfile or of Compile. It
// names where the problem is, never a value the caller passed (a
// context path, relative to the context, is named).
type Error struct {
	// Kind is the sentinel the error matches.
	Kind error
	// Step is the index of the builder step, or -1.
	Step int
	// Line is the Dockerfile line (from 1), or 0.
	Line int
	// Field names the step's field ("copy.src", "env", "base"...) or the
	// Dockerfile instruction ("COPY", "ADD"...).
	Field string
	// Path is the context path concerned (Compile's errors), or "".
	Path string
	// Reason is a fixed description.
	Reason string
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Kind.Error())
	if e.Line > 0 {
		b.WriteString(": line ")
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.Step >= 0 {
		b.WriteString(": step ")
		b.WriteString(strconv.Itoa(e.Step))
	}
	if e.Field != "" {
		b.WriteString(" (")
		b.WriteString(e.Field)
		b.WriteString(")")
	}
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(strconv.Quote(e.Path))
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Unwrap returns Kind.
func (e *Error) Unwrap() error { return e.Kind }

func stepErr(step int, field, reason string) *Error {
	return &Error{Kind: ErrInvalidTemplate, Step: step, Field: field, Reason: reason}
}

func lineErr(line int, instr, reason string) *Error {
	return &Error{Kind: ErrDockerfile, Step: -1, Line: line, Field: instr, Reason: reason}
}

func pathErr(kind error, p, reason string) *Error {
	return &Error{Kind: kind, Step: -1, Path: p, Reason: reason}
}
