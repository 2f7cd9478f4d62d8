// Package app assembles the rayito command line: the command tree, the
// exit-code table and the output helpers every command shares.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/command/local"
	"github.com/rayito-dev/rayito/cli/internal/command/run"
	"github.com/rayito-dev/rayito/cli/internal/command/sandbox"
	"github.com/rayito-dev/rayito/cli/internal/version"
)

// `rayito --version` (and -v) prints the version and the revision, not
// urfave's "rayito version 0.1.0".
func init() {
	cli.VersionPrinter = func(cmd *cli.Command) {
		fmt.Fprintln(cmd.Root().Writer, version.String())
	}
}

// Stdio returns the process's standard streams.
func Stdio() cliutil.IO {
	return cliutil.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}
}

// Root returns the command tree.
func Root(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:                      "rayito",
		Usage:                     "disposable, isolated Linux sandboxes for AI agents",
		Version:                   version.Version,
		Reader:                    io.In,
		Writer:                    io.Out,
		ErrWriter:                 io.Err,
		DisableSliceFlagSeparator: true,
		HideHelpCommand:           true,
		Commands: []*cli.Command{
			run.Command(io),
			sandbox.Command(io),
			local.Command(io),
		},
		// Errors are printed once, by Main.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
		OnUsageError: func(_ context.Context, _ *cli.Command, err error, _ bool) error {
			return cliutil.Usage(err)
		},
	}
}

// Main runs the CLI with args (args[0] is the program name) and returns the
// process exit code: 0 ok, 1 failure, 2 usage, or the remote command's
// code for run and exec.
func Main(ctx context.Context, args []string, io cliutil.IO) int {
	err := Root(io).Run(ctx, args)
	if err == nil {
		return cliutil.ExitOK
	}
	var code *cliutil.ExitCodeError
	if errors.As(err, &code) {
		return code.Code
	}
	var usage *cliutil.UsageError
	if errors.As(err, &usage) {
		fmt.Fprintln(io.Err, "rayito:", usage.Err)
		return cliutil.ExitUsage
	}
	var ec cli.ExitCoder
	if errors.As(err, &ec) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(io.Err, "rayito:", msg)
		}
		return ec.ExitCode()
	}
	fmt.Fprintln(io.Err, "rayito:", cliutil.Describe(err))
	return cliutil.ExitError
}
