// Package run is `rayito run`: create a sandbox, run one command in it with
// its output streamed, exit with the command's code, and kill the sandbox
// (also on Ctrl-C).
package run

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	"github.com/rayito-dev/rayito/cli/internal/platform"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Command returns `rayito run`.
func Command(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run a command in a fresh sandbox and exit with its code",
		ArgsUsage: "[--timeout D] [--env K=V]... [--user U] [--cwd DIR] -- CMD [ARGS...]",
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "timeout", Usage: "end the command after this long (the sandbox lives a minute longer)"},
			&cli.StringSliceFlag{Name: "env", Usage: "environment variable NAME=VALUE for the command (repeatable)"},
			&cli.StringFlag{Name: "user", Usage: "run as this user (default: user)"},
			&cli.StringFlag{Name: "cwd", Usage: "working directory (relative to HOME)"},
			&cli.BoolFlag{Name: "no-internet", Usage: "give the sandbox no outbound internet access"},
			cliutil.JSONFlag,
		},
		StopOnNthArg: cliutil.IntPtr(1),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return runAction(ctx, cmd, io)
		},
	}
}

// Result is what --json prints.
type Result struct {
	SandboxID string `json:"sandbox_id"`
	ExitCode  int    `json:"exit_code"`
	Status    string `json:"status"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
}

func runAction(ctx context.Context, cmd *cli.Command, io cliutil.IO) error {
	if err := cliutil.CheckArgs(cmd, 1, "the command to run (after --)"); err != nil {
		return err
	}
	argv := cmd.Args().Slice()
	envs, err := cliutil.ParseEnvs(cmd.StringSlice("env"))
	if err != nil {
		return err
	}
	timeout := cmd.Duration("timeout")
	if timeout < 0 {
		return cliutil.Usagef("--timeout must be positive")
	}
	asJSON := cmd.Bool("json")

	// Ctrl-C or SIGTERM cancels ctx; the sandbox is killed on every path.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	target, err := platform.Ensure(ctx, os.Getenv, io.Err)
	if err != nil {
		return err
	}
	defer func() { _ = target.Close(context.Background()) }()

	life := time.Hour
	if timeout > 0 {
		life = timeout + time.Minute
	}
	opts := append([]rayito.Option{rayito.WithTimeout(life)}, target.Options...)
	if cmd.Bool("no-internet") {
		opts = append(opts, rayito.WithInternetAccess(false))
	}
	sbx, err := rayito.Create(ctx, opts...)
	if err != nil {
		return interrupted(ctx, err)
	}
	defer func() {
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = sbx.Kill(kctx)
	}()

	copts := []rayito.CommandOption{rayito.WithCommandEnvs(envs)}
	if u := cmd.String("user"); u != "" {
		copts = append(copts, rayito.WithCommandUser(u))
	}
	if d := cmd.String("cwd"); d != "" {
		copts = append(copts, rayito.WithCwd(d))
	}
	if timeout > 0 {
		copts = append(copts, rayito.WithCommandTimeout(timeout))
	}
	if !asJSON {
		copts = append(copts,
			rayito.OnStdout(func(b []byte) { _, _ = io.Out.Write(b) }),
			rayito.OnStderr(func(b []byte) { _, _ = io.Err.Write(b) }))
	}
	h, err := sbx.Commands.StartExec(ctx, argv, copts...)
	if err != nil {
		return interrupted(ctx, err)
	}
	res, err := h.Wait(ctx)
	var exit *rayito.CommandExitError
	switch {
	case errors.As(err, &exit):
		res = exit.Result
	case err != nil:
		return interrupted(ctx, err)
	}
	if asJSON {
		if err := cliutil.PrintJSON(io.Out, Result{SandboxID: sbx.ID(), ExitCode: res.ExitCode, Status: res.Status, Stdout: res.Stdout, Stderr: res.Stderr}); err != nil {
			return err
		}
	}
	if res.ExitCode != 0 {
		return &cliutil.ExitCodeError{Code: res.ExitCode}
	}
	return nil
}

// interrupted turns a failure caused by Ctrl-C into exit code 130.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return cli.Exit("interrupted; the sandbox was killed", 130)
	}
	return fmt.Errorf("%w", err)
}
