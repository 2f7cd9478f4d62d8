package sandbox

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v3"

	"github.com/rayito-dev/rayito/cli/internal/cliutil"
	rayito "github.com/rayito-dev/rayito/sdk"
)

type execOut struct {
	Pid      int    `json:"pid"`
	ExitCode int    `json:"exit_code"`
	Status   string `json:"status"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

func execCommand(io cliutil.IO) *cli.Command {
	return &cli.Command{
		Name:      "exec",
		Usage:     "run a command in a sandbox and exit with its code",
		ArgsUsage: "ID [--env K=V]... [--user U] [--cwd DIR] [--timeout D] -- CMD [ARGS...]",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "env", Usage: "NAME=VALUE for this command (repeatable)"},
			&cli.StringFlag{Name: "user", Usage: "run as this user"},
			&cli.StringFlag{Name: "cwd", Usage: "working directory (relative to HOME)"},
			&cli.DurationFlag{Name: "timeout", Usage: "end the command after this long"},
			tokenFlag,
			cliutil.JSONFlag,
		},
		StopOnNthArg: cliutil.IntPtr(2),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := cliutil.CheckArgs(cmd, 2, "the sandbox id and the command"); err != nil {
				return err
			}
			argv := cmd.Args().Slice()[1:]
			envs, err := cliutil.ParseEnvs(cmd.StringSlice("env"))
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			sbx, err := connect(ctx, cmd)
			if err != nil {
				return err
			}
			opts := []rayito.CommandOption{rayito.WithCommandEnvs(envs)}
			if u := cmd.String("user"); u != "" {
				opts = append(opts, rayito.WithCommandUser(u))
			}
			if d := cmd.String("cwd"); d != "" {
				opts = append(opts, rayito.WithCwd(d))
			}
			if d := cmd.Duration("timeout"); d > 0 {
				opts = append(opts, rayito.WithCommandTimeout(d))
			}
			asJSON := cmd.Bool("json")
			if !asJSON {
				opts = append(opts,
					rayito.OnStdout(func(b []byte) { _, _ = io.Out.Write(b) }),
					rayito.OnStderr(func(b []byte) { _, _ = io.Err.Write(b) }))
			}
			h, err := sbx.Commands.StartExec(ctx, argv, opts...)
			if err != nil {
				return err
			}
			res, err := h.Wait(ctx)
			var exit *rayito.CommandExitError
			switch {
			case errors.As(err, &exit):
				res = exit.Result
			case ctx.Err() != nil:
				// Ctrl-C: the command goes with the interrupt.
				_ = h.Kill(context.WithoutCancel(ctx))
				return cli.Exit("interrupted; the command was killed", 130)
			case err != nil:
				return err
			}
			if asJSON {
				if err := cliutil.PrintJSON(io.Out, execOut{Pid: res.Pid, ExitCode: res.ExitCode, Status: res.Status, Stdout: res.Stdout, Stderr: res.Stderr}); err != nil {
					return err
				}
			}
			if res.ExitCode != 0 {
				return &cliutil.ExitCodeError{Code: res.ExitCode}
			}
			return nil
		},
	}
}
