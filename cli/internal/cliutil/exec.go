package cliutil

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/urfave/cli/v3"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// ExecFlags are the flags of a command run in a sandbox (run and exec).
func ExecFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "env", Aliases: []string{"e"}, Usage: "environment variable `NAME=VALUE` for the command (repeatable)"},
		&cli.StringFlag{Name: "user", Aliases: []string{"u"}, Usage: "run as this `USER` (default: the sandbox's user)"},
		&cli.StringFlag{Name: "workdir", Aliases: []string{"w", "cwd"}, Usage: "working `DIR`ectory (relative to HOME)"},
		&cli.DurationFlag{Name: "timeout", Usage: "end the command after this `DURATION` and exit 124"},
		&cli.BoolFlag{Name: "interactive", Aliases: []string{"i"}, Usage: "pass stdin to the command even when it is a terminal (default: when stdin is not a terminal)"},
		JSONFlag(),
	}
}

// ExecSpec is what ExecFlags parsed.
type ExecSpec struct {
	Envs    map[string]string
	User    string
	Workdir string
	Timeout time.Duration
	Stdin   bool
	JSON    bool
}

// ParseExec validates the ExecFlags of cmd before anything is contacted.
// stdin is the command's input: it is passed through when it is not a
// terminal, or with --interactive.
func ParseExec(cmd *cli.Command, stdin io.Reader) (ExecSpec, error) {
	envs, err := ParseEnvs(cmd.StringSlice("env"))
	if err != nil {
		return ExecSpec{}, err
	}
	d := cmd.Duration("timeout")
	if d < 0 || (cmd.IsSet("timeout") && d == 0) {
		return ExecSpec{}, Usagef("--timeout must be positive, got %s", d)
	}
	return ExecSpec{
		Envs: envs, User: cmd.String("user"), Workdir: cmd.String("workdir"), Timeout: d,
		Stdin: stdin != nil && (cmd.Bool("interactive") || !IsTerminal(stdin)),
		JSON:  cmd.Bool("json"),
	}, nil
}

// ExecResult is what --json prints for run and exec.
type ExecResult struct {
	SandboxID string `json:"sandbox_id"`
	Pid       int    `json:"pid"`
	ExitCode  int    `json:"exit_code"`
	Status    string `json:"status"`
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	// SandboxEnded is why the sandbox ended under the command ("" when
	// it did not).
	SandboxEnded string `json:"sandbox_ended,omitempty"`
}

// Exec runs argv in sbx as spec says, streaming its output to io (or
// printing one JSON result with --json) and its stdin from io.In, and
// returns an *ExitCodeError carrying a non-zero remote exit code, a
// *TimeoutError past --timeout, a *CommandEndError when the OOM killer
// ended it (exit 137), and an *ExecError when argv[0] cannot be started.
// A sandbox that ended under the command is a *SandboxEndError (see
// EndedUnder: "sandbox X ended: REASON", exit 124 when its time ran out,
// 137 otherwise), with --json too. When ctx ends first (Ctrl-C) the
// command is killed and the CLI exits 130.
func Exec(ctx context.Context, spec ExecSpec, io IO, sbx *rayito.Sandbox, argv []string) error {
	opts := []rayito.CommandOption{rayito.WithEnvs(spec.Envs)}
	if spec.User != "" {
		opts = append(opts, rayito.WithUser(spec.User))
	}
	if spec.Workdir != "" {
		opts = append(opts, rayito.WithCwd(spec.Workdir))
	}
	if spec.Timeout > 0 {
		opts = append(opts, rayito.WithTimeout(spec.Timeout))
	}
	if spec.Stdin {
		opts = append(opts, rayito.WithStdin())
	}
	if !spec.JSON {
		opts = append(opts,
			rayito.OnStdout(func(b []byte) { _, _ = io.Out.Write(b) }),
			rayito.OnStderr(func(b []byte) { _, _ = io.Err.Write(b) }))
	}
	h, err := sbx.Commands.StartExec(ctx, argv, opts...)
	if err != nil {
		return Interrupted(ctx, &ExecError{Program: argv[0], Err: err})
	}
	if spec.Stdin {
		go pumpStdin(ctx, h, io.In)
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
		ended := EndedUnder(ctx, sbx, 0, "", err)
		var se *SandboxEndError
		if !errors.As(ended, &se) {
			return OnSandbox(sbx.ID(), err)
		}
		if spec.JSON {
			// No result came: the output streamed so far is lost with
			// the sandbox; exit_code is the CLI's.
			out := ExecResult{SandboxID: sbx.ID(), Pid: h.Pid(), ExitCode: se.ExitCode(), SandboxEnded: EndText(se.Reason, se.Detail)}
			if err := PrintJSON(io.Out, out); err != nil {
				return err
			}
		}
		return ended
	}
	ended := EndedUnder(ctx, sbx, res.ExitCode, res.Status, nil)
	if spec.JSON {
		out := ExecResult{SandboxID: sbx.ID(), Pid: res.Pid, ExitCode: res.ExitCode, Status: string(res.Status), Stdout: res.Stdout, Stderr: res.Stderr}
		var se *SandboxEndError
		if errors.As(ended, &se) {
			out.SandboxEnded = EndText(se.Reason, se.Detail)
		}
		if err := PrintJSON(io.Out, out); err != nil {
			return err
		}
	}
	if ended != nil {
		return ended
	}
	code := res.ExitCode
	var end error
	switch res.Status {
	case rayito.StatusTimeout:
		code, end = ExitTimeout, &TimeoutError{Program: argv[0], After: spec.Timeout.String()}
	case rayito.StatusOOMKilled:
		end = &CommandEndError{Program: argv[0], Why: "killed by the OOM killer (out of memory)", Code: code}
	}
	switch {
	case end != nil && !spec.JSON:
		return end
	case code != 0:
		return &ExitCodeError{Code: code}
	}
	return nil
}

// pumpStdin copies in to the command's stdin and closes it at EOF.
func pumpStdin(ctx context.Context, h *rayito.CommandHandle, in io.Reader) {
	ctx = context.WithoutCancel(ctx)
	buf := make([]byte, 32<<10)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if h.SendStdin(ctx, append([]byte(nil), buf[:n]...)) != nil {
				return
			}
		}
		if err != nil {
			_ = h.CloseStdin(ctx)
			return
		}
	}
}
