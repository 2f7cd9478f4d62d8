package cliutil

import (
	"context"
	"errors"

	"github.com/urfave/cli/v3"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// ExecFlags are the flags of a command run in a sandbox (run and exec).
func ExecFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "env", Usage: "environment variable NAME=VALUE for the command (repeatable)"},
		&cli.StringFlag{Name: "user", Usage: "run as this user (default: user)"},
		&cli.StringFlag{Name: "cwd", Usage: "working directory (relative to HOME)"},
		&cli.DurationFlag{Name: "timeout", Usage: "end the command after this long"},
		JSONFlag,
	}
}

// ExecResult is what --json prints for run and exec.
type ExecResult struct {
	SandboxID string `json:"sandbox_id"`
	Pid       int    `json:"pid"`
	ExitCode  int    `json:"exit_code"`
	Status    string `json:"status"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
}

// Exec runs argv in sbx with the ExecFlags of cmd, streaming its output to
// io (or printing one JSON result with --json), and returns an
// *ExitCodeError carrying a non-zero remote exit code. When ctx ends first
// (Ctrl-C) the command is killed and the CLI exits 130.
func Exec(ctx context.Context, cmd *cli.Command, io IO, sbx *rayito.Sandbox, argv []string) error {
	envs, err := ParseEnvs(cmd.StringSlice("env"))
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
	} else if d < 0 {
		return Usagef("--timeout must be positive")
	}
	asJSON := cmd.Bool("json")
	if !asJSON {
		opts = append(opts,
			rayito.OnStdout(func(b []byte) { _, _ = io.Out.Write(b) }),
			rayito.OnStderr(func(b []byte) { _, _ = io.Err.Write(b) }))
	}
	h, err := sbx.Commands.StartExec(ctx, argv, opts...)
	if err != nil {
		return Interrupted(ctx, err)
	}
	res, err := h.Wait(ctx)
	var exit *rayito.CommandExitError
	switch {
	case errors.As(err, &exit):
		res = exit.Result
	case ctx.Err() != nil:
		_ = h.Kill(context.WithoutCancel(ctx))
		return Interrupted(ctx, err)
	case err != nil:
		return err
	}
	if asJSON {
		out := ExecResult{SandboxID: sbx.ID(), Pid: res.Pid, ExitCode: res.ExitCode, Status: res.Status, Stdout: res.Stdout, Stderr: res.Stderr}
		if err := PrintJSON(io.Out, out); err != nil {
			return err
		}
	}
	if res.ExitCode != 0 {
		return &ExitCodeError{Code: res.ExitCode}
	}
	return nil
}

// Interrupted turns a failure caused by Ctrl-C (ctx ended) into exit code
// 130; other errors pass through.
func Interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return cli.Exit("interrupted", 130)
	}
	return err
}
