// Package app assembles the rayito command line: the command tree, the
// exit-code table and the output helpers every command shares.
package app

import (
	"context"
	"fmt"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	agentcmd "github.com/rayito-dev/rayito/cli/internal/command/agent"
	"github.com/rayito-dev/rayito/cli/internal/command/dashboard"
	"github.com/rayito-dev/rayito/cli/internal/command/doctor"
	"github.com/rayito-dev/rayito/cli/internal/command/e2b"
	"github.com/rayito-dev/rayito/cli/internal/command/events"
	"github.com/rayito-dev/rayito/cli/internal/command/image"
	"github.com/rayito-dev/rayito/cli/internal/command/local"
	mcpcmd "github.com/rayito-dev/rayito/cli/internal/command/mcp"
	"github.com/rayito-dev/rayito/cli/internal/command/run"
	"github.com/rayito-dev/rayito/cli/internal/command/sandbox"
	"github.com/rayito-dev/rayito/cli/internal/command/stack"
	"github.com/rayito-dev/rayito/cli/internal/command/template"
	"github.com/rayito-dev/rayito/cli/internal/version"
	rayito "github.com/rayito-dev/rayito/sdk"
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

// Root returns the command tree, reading the process environment.
func Root(io cliutil.IO) *cli.Command {
	return NewRoot(&cliutil.Factory{IO: io, Env: os.Getenv})
}

// NewRoot returns the command tree whose commands take their streams and
// environment from f.
func NewRoot(f *cliutil.Factory) *cli.Command {
	root := &cli.Command{
		Name:                      "rayito",
		Usage:                     "disposable, isolated Linux sandboxes for AI agents",
		Description:               "Exit codes: 0 ok, 1 failure, 2 usage, 124 a sandbox's deadline passed; run and exec: the\ncommand's code, 124 timeout, 126 not executable, 127 not found, 130 interrupted.\nSee 'rayito help environment'.",
		Version:                   version.Version,
		Reader:                    f.IO.In,
		Writer:                    f.IO.Out,
		ErrWriter:                 f.IO.Err,
		DisableSliceFlagSeparator: true,
		HideHelpCommand:           true,
		EnableShellCompletion:     true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "endpoint", Usage: "the local platform's `URL` (default: RAYITO_ENDPOINT, else " + rayito.DefaultLocalEndpoint + ") " + cliutil.LocalOnly},
		},
		Before: func(ctx context.Context, cmd *cli.Command) (context.Context, error) {
			f.Endpoint = cmd.String("endpoint")
			return ctx, nil
		},
		Commands: []*cli.Command{
			run.Command(f),
			sandbox.Command(f),
			local.Command(f),
			image.Command(f),
			template.Command(f),
			doctor.Command(f),
			e2b.Command(f),
			events.Command(f),
			stack.Command(f),
			dashboard.Command(f),
			mcpcmd.Command(f),
			agentcmd.Command(f),
			secretCommand(f),
			helpCommand(f),
			versionCommand(f),
		},
		ConfigureShellCompletionCommand: configureCompletion,
		// Errors are printed once, by Main.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
	}
	prepare(root)
	return root
}

// Main runs the CLI with args (args[0] is the program name) and returns the
// process exit code (cliutil's table: 0 ok, 1 failure, 2 usage, 124
// timeout (the command's or the sandbox's deadline), 126 not executable,
// 127 not found, 130 interrupted, or the remote command's code for run and
// exec).
func Main(ctx context.Context, args []string, io cliutil.IO) int {
	err := Root(io).Run(ctx, args)
	msg, code := cliutil.Exit(err)
	if msg != "" {
		fmt.Fprintln(io.Err, "rayito:", msg)
	}
	if hint := cliutil.UsageHint(err); hint != "" {
		fmt.Fprintln(io.Err, hint)
	}
	return code
}
