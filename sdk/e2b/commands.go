package e2b

import (
	"context"
	"errors"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// CommandOption configures a command: rayito's WithCwd, WithEnvs,
// WithUser, WithTimeout, WithStdin, WithTag, and OnStdout/OnStderr here.
type CommandOption = rayito.CommandOption

// OnStdout calls f with each chunk of the command's stdout as text (E2B's
// onStdout).
func OnStdout(f func(string)) CommandOption { return rayito.OnStdout(func(b []byte) { f(string(b)) }) }

// OnStderr calls f with each chunk of the command's stderr as text (E2B's
// onStderr).
func OnStderr(f func(string)) CommandOption { return rayito.OnStderr(func(b []byte) { f(string(b)) }) }

// CommandResult is a finished command (E2B's CommandResult).
type CommandResult struct {
	Pid      int
	ExitCode int
	Stdout   string
	Stderr   string
	// Error is how it ended when not by itself ("deadline_exceeded",
	// "signal: killed", ...).
	Error string
}

func resultOf(r *rayito.CommandResult) *CommandResult {
	if r == nil {
		return nil
	}
	return &CommandResult{Pid: r.Pid, ExitCode: r.ExitCode, Stdout: r.Stdout, Stderr: r.Stderr, Error: r.Error}
}

// ProcessInfo describes a live process (E2B's ProcessInfo).
type ProcessInfo = rayito.ProcessInfo

// Commands runs processes in the sandbox (E2B's sandbox.commands).
type Commands struct{ sbx *rayito.Sandbox }

// Run runs a shell command and waits for it (E2B's commands.run). A
// non-zero exit is a *CommandExitError carrying the result.
func (c *Commands) Run(ctx context.Context, cmd string, opts ...CommandOption) (*CommandResult, error) {
	r, err := c.sbx.Commands.Run(ctx, cmd, opts...)
	if err != nil {
		return resultOf(r), wrap(err)
	}
	return resultOf(r), nil
}

// RunBackground starts a shell command and returns at once (E2B's
// commands.run with background: true).
func (c *Commands) RunBackground(ctx context.Context, cmd string, opts ...CommandOption) (*CommandHandle, error) {
	h, err := c.sbx.Commands.Start(ctx, cmd, opts...)
	if err != nil {
		return nil, wrap(err)
	}
	return &CommandHandle{h: h}, nil
}

// Connect attaches to a running process (E2B's commands.connect).
func (c *Commands) Connect(ctx context.Context, pid int, opts ...CommandOption) (*CommandHandle, error) {
	h, err := c.sbx.Commands.Connect(ctx, pid, opts...)
	if err != nil {
		return nil, wrap(err)
	}
	return &CommandHandle{h: h}, nil
}

// Kill kills a process (SIGKILL): false when there is no such process.
func (c *Commands) Kill(ctx context.Context, pid int) (bool, error) {
	return killedProcess(c.sbx.Commands.Kill(ctx, pid))
}

// List lists the running processes (E2B's commands.list).
func (c *Commands) List(ctx context.Context) ([]ProcessInfo, error) {
	ps, err := c.sbx.Commands.List(ctx)
	return ps, wrap(err)
}

// SendStdin writes data to a process's stdin (started WithStdin).
func (c *Commands) SendStdin(ctx context.Context, pid int, data string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the attachment, not the process
	h, err := c.sbx.Commands.Connect(ctx, pid)
	if err != nil {
		return wrap(err)
	}
	return wrap(h.SendStdin(ctx, []byte(data)))
}

// CommandHandle is a running command (E2B's CommandHandle).
type CommandHandle struct{ h *rayito.CommandHandle }

// Pid is the process id.
func (h *CommandHandle) Pid() int { return h.h.Pid() }

// Wait waits for the command to end; a non-zero exit is a
// *CommandExitError.
func (h *CommandHandle) Wait(ctx context.Context) (*CommandResult, error) {
	r, err := h.h.Wait(ctx)
	return resultOf(r), wrap(err)
}

// Kill kills the command: false when it had ended already.
func (h *CommandHandle) Kill(ctx context.Context) (bool, error) {
	return killedProcess(h.h.Kill(ctx))
}

// SendStdin writes to the command's stdin (started WithStdin).
func (h *CommandHandle) SendStdin(ctx context.Context, data string) error {
	return wrap(h.h.SendStdin(ctx, []byte(data)))
}

// CloseStdin closes the command's stdin.
func (h *CommandHandle) CloseStdin(ctx context.Context) error { return wrap(h.h.CloseStdin(ctx)) }

// killedProcess is E2B's kill result: false for a process that does not
// exist or has ended.
func killedProcess(err error) (bool, error) {
	if errors.Is(err, rayito.ErrNotFound) || rayito.ReasonOf(err) == rayito.ReasonNotRunning {
		return false, nil
	}
	return err == nil, wrap(err)
}
