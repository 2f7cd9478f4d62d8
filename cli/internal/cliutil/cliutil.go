// Package cliutil holds what every rayito command shares: its streams, the
// exit-code table, typed exit errors, JSON output and error wording.
package cliutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/term"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Exit codes of the CLI; run and exec exit with the remote command's code.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// IO is a command's standard streams.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// ExitCodeError ends the CLI with Code without printing anything more.
type ExitCodeError struct{ Code int }

func (e *ExitCodeError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// UsageError is a command-line mistake (exit code 2).
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usage wraps err as a usage error.
func Usage(err error) error { return &UsageError{Err: err} }

// Usagef formats a usage error.
func Usagef(format string, args ...any) error { return Usage(fmt.Errorf(format, args...)) }

// PrintJSON writes v as indented JSON.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// Describe words an error for a person, without secrets (the SDK's errors
// carry none).
func Describe(err error) string {
	var api *rayito.APIError
	if errors.As(err, &api) {
		return api.Error()
	}
	return err.Error()
}
