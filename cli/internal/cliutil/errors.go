package cliutil

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v3"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Exit codes of the CLI, as gh and docker use them; run and exec exit with
// the remote command's own code when it ran.
const (
	ExitOK    = 0
	ExitError = 1
	// ExitUsage: a bad flag, command, argument, value or environment
	// variable; nothing was sent anywhere.
	ExitUsage = 2
	// ExitTimeout: the command ran longer than --timeout (like timeout(1)),
	// or the sandbox's own deadline ended it or the sandbox.
	ExitTimeout = 124
	// ExitCannotExecute: the program exists but is not executable.
	ExitCannotExecute = 126
	// ExitCommandNotFound: the program does not exist in the sandbox.
	ExitCommandNotFound = 127
	// ExitInterrupted: Ctrl-C or SIGTERM (128 + SIGINT).
	ExitInterrupted = 130
)

// ExitCodeError ends the CLI with Code without printing anything more.
type ExitCodeError struct{ Code int }

func (e *ExitCodeError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// UsageError is a command-line mistake (exit code 2). Command is the full
// name of the command it belongs to ("rayito sandbox list"), filled in by
// the app when the action leaves it empty; Hint replaces the default hint
// ("see 'COMMAND --help'").
type UsageError struct {
	Err     error
	Command string
	Hint    string
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usage wraps err as a usage error.
func Usage(err error) error { return &UsageError{Err: err} }

// Usagef formats a usage error.
func Usagef(format string, args ...any) error { return Usage(fmt.Errorf(format, args...)) }

// EnvUsagef is a usage error about an environment variable: its hint is
// `rayito help environment`.
func EnvUsagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...), Hint: "see 'rayito help environment'"}
}

// ExecError is a failure to start Program in a sandbox.
type ExecError struct {
	Program string
	Err     error
}

func (e *ExecError) Error() string { return e.Program + ": " + e.Err.Error() }
func (e *ExecError) Unwrap() error { return e.Err }

// TimeoutError: the command ran longer than its --timeout.
type TimeoutError struct {
	Program string
	After   string
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("%s: timed out after %s (--timeout)", e.Program, e.After)
}

// CommandEndError: the remote command Program ended in a way worth a line
// of its own (Why: "killed by the OOM killer"); the CLI exits with Code.
type CommandEndError struct {
	Program string
	Why     string
	Code    int
}

func (e *CommandEndError) Error() string { return e.Program + ": " + e.Why }

// ErrNoSandbox: the platform does not know the sandbox.
var ErrNoSandbox = errors.New("no such sandbox")

// SandboxError is a failure of an operation on sandbox ID.
type SandboxError struct {
	ID  string
	Err error
}

func (e *SandboxError) Error() string { return Describe(e) }
func (e *SandboxError) Unwrap() error { return e.Err }

// OnSandbox attaches sandbox id to err (nil stays nil).
func OnSandbox(id string, err error) error {
	if err == nil {
		return nil
	}
	var (
		se    *SandboxError
		usage *UsageError
	)
	if errors.As(err, &se) || errors.As(err, &usage) {
		return err
	}
	return &SandboxError{ID: id, Err: err}
}

// Interrupted turns a failure caused by Ctrl-C (ctx ended) into exit code
// 130; other errors pass through.
func Interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return cli.Exit("interrupted", ExitInterrupted)
	}
	return err
}

// Exit maps err to what the CLI prints on stderr (without the "rayito: "
// prefix; "" for nothing) and its exit code. It is the one place where
// errors become exit codes.
func Exit(err error) (msg string, code int) {
	var (
		exit    *ExitCodeError
		usage   *UsageError
		execErr *ExecError
		timeout *TimeoutError
		ended   *CommandEndError
		ec      cli.ExitCoder
	)
	switch {
	case err == nil:
		return "", ExitOK
	case errors.As(err, &exit):
		return "", exit.Code
	case errors.As(err, &usage):
		return Describe(err), ExitUsage
	case errors.As(err, &timeout):
		return timeout.Error(), ExitTimeout
	case errors.As(err, &ended):
		return ended.Error(), ended.Code
	case errors.As(err, &execErr):
		switch execFailure(execErr.Err) {
		case ExitCommandNotFound:
			return execErr.Program + ": executable not found", ExitCommandNotFound
		case ExitCannotExecute:
			return execErr.Program + ": not executable (permission denied)", ExitCannotExecute
		}
		return execErr.Program + ": " + Describe(execErr.Err), ExitError
	case errors.As(err, &ec):
		return Describe(err), ec.ExitCode()
	case errors.Is(err, rayito.ErrSandboxTimeout):
		// The sandbox's deadline passed: it ended, or answers no more.
		return Describe(err), ExitTimeout
	}
	return Describe(err), ExitError
}

// UsageHint returns the line printed under a usage error.
func UsageHint(err error) string {
	var usage *UsageError
	if !errors.As(err, &usage) {
		return ""
	}
	if usage.Hint != "" {
		return usage.Hint
	}
	if usage.Command != "" {
		return "see '" + usage.Command + " --help'"
	}
	return "see 'rayito --help'"
}

// execFailure tells, from rayd's answer to Start, a program that does not
// exist (127) or cannot be executed (126) from any other refusal (0), by
// the ErrorInfo reason the SDK exposes.
func execFailure(err error) int {
	switch rayito.ReasonOf(err) {
	case rayito.ReasonExecutableNotFound:
		return ExitCommandNotFound
	case rayito.ReasonNotExecutable:
		return ExitCannotExecute
	}
	return 0
}

// Describe words an error for a person: no doubled "rayito:" prefixes,
// no wire codes in snake_case, no AWS exception names, no Go types. The
// SDK already words what the platform and the sandbox answered ("sandbox
// X not found", "sandbox X ended at T (reason)", "no local platform at
// URL"); its errors carry no secrets.
func Describe(err error) string {
	var (
		se    *SandboxError
		rpc   *rayito.RPCError
		ended *rayito.SandboxEndedError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &se):
		return describeSandbox(se)
	case errors.As(err, &ended):
		return DescribeEnd(ended)
	case errors.As(err, &rpc):
		return clean(prefixOf(err, rpc) + describeRPC(rpc))
	}
	return clean(err.Error())
}

// DescribeEnd words a sandbox's end: "sandbox X ended: timeout",
// "sandbox X ended: init_exited (exit status 3)", "sandbox X ended:
// unknown (Success.)" (the platform's words for a reason the SDK does not
// know), or "sandbox X ended" when nothing is known.
func DescribeEnd(e *rayito.SandboxEndedError) string {
	if (e.Reason == "" || e.Reason == rayito.EndUnknown) && e.Detail == "" {
		return "sandbox " + e.ID + " ended"
	}
	return "sandbox " + e.ID + " ended: " + EndText(e.Reason, e.Detail)
}

// EndText is an end reason with its detail: "init_exited (exit status
// 3)"; "" for none.
func EndText(r rayito.EndReason, detail string) string {
	switch {
	case r == "" && detail == "":
		return ""
	case r == "":
		r = rayito.EndUnknown
	}
	if detail == "" {
		return string(r)
	}
	return string(r) + " (" + detail + ")"
}

func describeSandbox(se *SandboxError) string {
	var ambiguous *AmbiguousIDError
	switch {
	case errors.As(se.Err, &ambiguous):
		return ambiguous.Error()
	case errors.Is(se.Err, errMalformedID):
		return "sandbox " + se.ID + " not found (sandbox ids look like microvm-<uuid>)"
	case errors.Is(se.Err, ErrNoSandbox):
		return "sandbox " + se.ID + " not found"
	}
	msg := Describe(se.Err)
	if strings.Contains(msg, se.ID) {
		return msg
	}
	return "sandbox " + se.ID + ": " + msg
}

// prefixOf is the context the callers wrapped around inner ("kill X: ").
func prefixOf(err, inner error) string {
	outer, in := err.Error(), inner.Error()
	if p, ok := strings.CutSuffix(outer, in); ok {
		return p
	}
	return ""
}

func describeRPC(e *rayito.RPCError) string {
	if e.Message != "" {
		return e.Message
	}
	return strings.ReplaceAll(string(e.Code), "_", " ")
}

var (
	sdkPrefix = regexp.MustCompile(`(^|: )(rayito|microvms|localvm|launcher): `)
	// Go's flag-style single dash before a long name.
	singleDashLong = regexp.MustCompile(`(^|[\s(])-([a-z][a-z0-9-]+)`)
)

// clean drops the package prefixes the SDK and the local platform put on
// their errors, which the CLI's own "rayito: " would double.
func clean(msg string) string {
	for {
		m := sdkPrefix.ReplaceAllString(msg, "$1")
		if m == msg {
			return msg
		}
		msg = m
	}
}

// FlagMessage rewrites urfave/cli's flag-parsing errors ("flag provided
// but not defined: -bogus") into the CLI's wording, long flags with two
// dashes.
func FlagMessage(err error) error {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag provided but not defined: "), "-")
		return fmt.Errorf("unknown flag %s", dashed(name))
	case strings.HasPrefix(msg, "flag needs an argument: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag needs an argument: "), "-")
		return fmt.Errorf("flag %s needs a value", dashed(name))
	case strings.HasPrefix(msg, "invalid value "):
		// invalid value "x" for flag -timeout: time: invalid duration "x"
		head, detail, _ := strings.Cut(strings.Replace(msg, " for flag ", " for ", 1), ": ")
		head = singleDashLong.ReplaceAllString(head, "$1--$2")
		switch {
		case strings.HasPrefix(detail, "strconv."):
			return errors.New(head + ": not a whole number")
		case strings.HasPrefix(detail, "time: "):
			return errors.New(head + ": not a duration (like 90s, 5m, 1h30m)")
		}
		return errors.New(head)
	}
	return errors.New(singleDashLong.ReplaceAllString(msg, "$1--$2"))
}

func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}
