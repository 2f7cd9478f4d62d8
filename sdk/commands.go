package rayito

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/sdk/internal/follow"
)

// Commands runs processes in a sandbox.
type Commands struct {
	sbx *Sandbox
}

type commandConfig struct {
	envs           map[string]string
	cwd            *string
	user           string
	timeout        time.Duration
	stdin          bool
	tag            *string
	onStdout       func([]byte)
	onStderr       func([]byte)
	maxOutputBytes int
	callExts       // the extensions' values (sdk/secrets' WithSecrets)
}

// commandOption is a CommandOption made of a function.
type commandOption func(*commandConfig)

func (f commandOption) applyCommand(c *commandConfig) { f(c) }

// WithStdin gives the command a stdin pipe (SendStdin, CloseStdin);
// without it stdin is /dev/null.
func WithStdin() CommandOption { return commandOption(func(c *commandConfig) { c.stdin = true }) }

// WithTag labels the command in List.
func WithTag(tag string) CommandOption {
	return commandOption(func(c *commandConfig) { c.tag = &tag })
}

// OutputOption is OnStdout or OnStderr: it applies to commands and to
// code.
type OutputOption interface {
	CommandOption
	CodeOption
}

// outputOption is OnStdout (stderr false) or OnStderr.
type outputOption struct {
	stderr bool
	f      func([]byte)
}

func (o outputOption) applyCommand(c *commandConfig) {
	if o.stderr {
		c.onStderr = o.f
	} else {
		c.onStdout = o.f
	}
}

func (o outputOption) applyCode(c *codeConfig) {
	if o.stderr {
		c.onStderr = o.f
	} else {
		c.onStdout = o.f
	}
}

// OnStdout is called with each piece of stdout, in order.
func OnStdout(f func([]byte)) OutputOption { return outputOption{f: f} }

// OnStderr is called with each piece of stderr, in order.
func OnStderr(f func([]byte)) OutputOption { return outputOption{stderr: true, f: f} }

// WithMaxOutputBytes caps the output stored in the result per stream
// (default 64 MiB); callbacks still see everything.
func WithMaxOutputBytes(n int) CommandOption {
	return commandOption(func(c *commandConfig) { c.maxOutputBytes = n })
}

func commandOpts(opts []CommandOption) *commandConfig {
	cc := &commandConfig{maxOutputBytes: MaxOutputBytes}
	for _, o := range opts {
		if o != nil {
			o.applyCommand(cc)
		}
	}
	return cc
}

// CommandStatus is how a command ended (CommandResult.Status). The set is
// closed; later versions may add statuses.
type CommandStatus string

// The statuses.
const (
	// StatusExited: it exited on its own (ExitCode is its exit status).
	StatusExited CommandStatus = "exited"
	// StatusSignaled: a signal ended it (ExitCode is 128+signal).
	StatusSignaled CommandStatus = "signaled"
	// StatusTimeout: its own timeout (WithTimeout) ended it.
	StatusTimeout CommandStatus = "timeout"
	// StatusOOMKilled: the kernel's OOM killer ended it (SIGKILL, ExitCode
	// 137): the sandbox, or its memory limit, ran out of memory.
	StatusOOMKilled CommandStatus = "oom_killed"
	// StatusSandboxTimeout: the sandbox's deadline ended it (see
	// ErrSandboxTimeout).
	StatusSandboxTimeout CommandStatus = "sandbox_timeout"
	// StatusOutputTruncated: this client fell too far behind the output
	// and rayd dropped its stream; the command goes on (reconnect with
	// Commands.Connect).
	StatusOutputTruncated CommandStatus = "output_truncated"
)

// CommandResult is a finished command.
type CommandResult struct {
	Pid      int
	ExitCode int
	// Status is how it ended; anything but StatusExited with ExitCode 0
	// comes with a *CommandExitError.
	Status CommandStatus
	// Error is rayd's error code for the end, e.g. deadline_exceeded.
	Error  string
	Stdout string
	Stderr string
	// StdoutTruncated and StderrTruncated say the stored output was capped.
	StdoutTruncated bool
	StderrTruncated bool
}

// Run runs command with bash -c and waits for it. A non-zero exit returns
// the result and a *CommandExitError.
func (c *Commands) Run(ctx context.Context, command string, opts ...CommandOption) (_ *CommandResult, err error) {
	ctx, sp := c.sbx.span(ctx, "Commands.Run")
	defer func() { sp.end(err) }()
	return c.Exec(ctx, []string{"bash", "-c", command}, opts...)
}

// Exec runs argv directly (no shell) and waits for it. A non-zero exit
// returns the result and a *CommandExitError.
func (c *Commands) Exec(ctx context.Context, argv []string, opts ...CommandOption) (*CommandResult, error) {
	h, err := c.StartExec(ctx, argv, opts...)
	if err != nil {
		return nil, err
	}
	return h.Wait(ctx)
}

// Start starts command with bash -c in the background.
func (c *Commands) Start(ctx context.Context, command string, opts ...CommandOption) (*CommandHandle, error) {
	return c.StartExec(ctx, []string{"bash", "-c", command}, opts...)
}

// StartExec starts argv in the background. The process outlives ctx and
// this client; use Kill to stop it.
func (c *Commands) StartExec(ctx context.Context, argv []string, opts ...CommandOption) (*CommandHandle, error) {
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("%w: empty command", ErrInvalidArgument)
	}
	cc := commandOpts(opts)
	envs, err := c.sbx.extensionEnvs(ctx, cc.envs, cc.exts)
	if err != nil {
		return nil, err
	}
	req := &raydv1.StartRequest{
		Process: &raydv1.ProcessConfig{Cmd: argv[0], Args: argv[1:], Envs: envs, Cwd: cc.cwd},
		Stdin:   cc.stdin,
		Tag:     cc.tag,
	}
	if cc.user != "" {
		req.User = &raydv1.User{Username: cc.user}
	}
	if cc.timeout > 0 {
		req.TimeoutMs = uint64(cc.timeout / time.Millisecond)
	}
	// The stream belongs to the handle, not to ctx: the process and its
	// output outlive the call that started it.
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := c.sbx.dp.process.Start(sctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		return nil, rpcErr("start", err)
	}
	// The first message is start{pid}, or the start failed.
	first, err := follow.Open(stream)
	if err != nil {
		cancel()
		return nil, rpcErr("start", err)
	}
	st := first.GetStart()
	if st == nil {
		cancel()
		stream.Close()
		return nil, rpcErr("start", errors.New("stream did not open with start"))
	}
	h := c.newHandle(sctx, cancel, int(st.GetPid()), cc)
	go h.follow(sctx, stream)
	return h, nil
}

// CommandHandle is a running command.
type CommandHandle struct {
	cmds   *Commands
	cfg    *commandConfig
	pid    int
	cancel context.CancelFunc
	done   chan struct{}
	fol    *follow.Follower[raydv1.ProcessEvent]

	mu     sync.Mutex
	stdout capped
	stderr capped
	result *CommandResult
	err    error
}

// processShape reads ProcessService streams.
var processShape = follow.Shape[raydv1.ProcessEvent]{
	Seq: func(m *raydv1.ProcessEvent) (uint64, bool) {
		if d := m.GetData(); d != nil {
			return d.GetSeq(), true
		}
		return 0, false
	},
	End:       func(m *raydv1.ProcessEvent) bool { end, _ := endEvent(m.GetEnd()); return end },
	Cut:       func(m *raydv1.ProcessEvent) bool { _, cut := endEvent(m.GetEnd()); return cut },
	Keepalive: func(m *raydv1.ProcessEvent) bool { return m.GetKeepalive() != nil },
}

// newHandle makes the handle of pid, whose streams live on ctx.
func (c *Commands) newHandle(ctx context.Context, cancel context.CancelFunc, pid int, cc *commandConfig) *CommandHandle {
	h := &CommandHandle{cmds: c, cfg: cc, pid: pid, cancel: cancel, done: make(chan struct{})}
	h.fol = &follow.Follower[raydv1.ProcessEvent]{
		Shape: processShape,
		Env:   c.sbx.followEnv("follow"),
		Attach: func(ctx context.Context, from uint64) (*connect.ServerStreamForClient[raydv1.ProcessEvent], error) {
			return c.sbx.dp.process.Connect(ctx, connect.NewRequest(&raydv1.ConnectRequest{Pid: uint32(pid), FromSeq: from}))
		},
		OnData: h.onData,
	}
	return h
}

// Pid is the process id in the sandbox.
func (h *CommandHandle) Pid() int { return h.pid }

// follow runs the follower to the end and records the result.
func (h *CommandHandle) follow(ctx context.Context, stream *connect.ServerStreamForClient[raydv1.ProcessEvent]) {
	defer close(h.done)
	defer h.cancel()
	last, err := h.fol.Run(ctx, stream)
	h.finish(last.GetEnd(), err)
}

func (h *CommandHandle) onData(m *raydv1.ProcessEvent) {
	d := m.GetData()
	if out := d.GetStdout(); out != nil {
		h.mu.Lock()
		h.stdout.write(out, h.cfg.maxOutputBytes)
		h.mu.Unlock()
		if h.cfg.onStdout != nil {
			h.cfg.onStdout(out)
		}
	}
	if out := d.GetStderr(); out != nil {
		h.mu.Lock()
		h.stderr.write(out, h.cfg.maxOutputBytes)
		h.mu.Unlock()
		if h.cfg.onStderr != nil {
			h.cfg.onStderr(out)
		}
	}
}

func (h *CommandHandle) finish(end *raydv1.EndEvent, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if end == nil {
		h.err = err
		return
	}
	res := &CommandResult{
		Pid: h.pid, ExitCode: int(end.GetExitCode()), Status: CommandStatus(end.GetStatus()), Error: end.GetError(),
		Stdout: string(h.stdout.buf), Stderr: string(h.stderr.buf),
		StdoutTruncated: h.stdout.truncated, StderrTruncated: h.stderr.truncated,
	}
	h.result = res
	if res.ExitCode != 0 || res.Status != StatusExited {
		h.err = &CommandExitError{Result: res}
	}
}

// Wait waits for the command to end. A non-zero exit returns the result
// and a *CommandExitError. Canceling ctx stops waiting, not the command.
func (h *CommandHandle) Wait(ctx context.Context) (*CommandResult, error) {
	select {
	case <-h.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.result, h.err
}

// Kill sends SIGKILL to the command's process group.
func (h *CommandHandle) Kill(ctx context.Context) error { return h.cmds.Kill(ctx, h.pid) }

// Signal sends sig (SIGTERM, SIGINT, SIGKILL, SIGHUP, SIGQUIT, SIGUSR1,
// SIGUSR2, SIGSTOP, SIGCONT) to the command's process group.
func (h *CommandHandle) Signal(ctx context.Context, sig syscall.Signal) error {
	return h.cmds.Signal(ctx, h.pid, sig)
}

// SendStdin writes to the command's stdin (started WithStdin).
func (h *CommandHandle) SendStdin(ctx context.Context, data []byte) error {
	_, err := h.cmds.sbx.dp.process.SendInput(ctx, connect.NewRequest(&raydv1.SendInputRequest{Pid: uint32(h.pid), Data: data}))
	return rpcErr("send stdin", err)
}

// CloseStdin closes the command's stdin.
func (h *CommandHandle) CloseStdin(ctx context.Context) error {
	_, err := h.cmds.sbx.dp.process.CloseStdin(ctx, connect.NewRequest(&raydv1.CloseStdinRequest{Pid: uint32(h.pid)}))
	return rpcErr("close stdin", err)
}

// Kill sends SIGKILL to a process group.
func (c *Commands) Kill(ctx context.Context, pid int) error {
	return c.Signal(ctx, pid, syscall.SIGKILL)
}

// Signal sends sig to a process group.
func (c *Commands) Signal(ctx context.Context, pid int, sig syscall.Signal) error {
	s := raydv1.Signal(sig)
	if _, ok := raydv1.Signal_name[int32(s)]; !ok || s == raydv1.Signal_SIGNAL_UNSPECIFIED {
		return fmt.Errorf("%w: signal %d is not supported", ErrInvalidArgument, sig)
	}
	_, err := c.sbx.dp.process.SendSignal(ctx, connect.NewRequest(&raydv1.SendSignalRequest{Pid: uint32(pid), Signal: s}))
	return rpcErr("signal", err)
}

// ProcessInfo describes a live process.
type ProcessInfo struct {
	Pid       int
	Cmd       string
	Args      []string
	Tag       string
	User      string
	StartedAt time.Time
}

// List lists the sandbox's live processes.
func (c *Commands) List(ctx context.Context) ([]ProcessInfo, error) {
	resp, err := c.sbx.dp.process.List(ctx, connect.NewRequest(&raydv1.ListRequest{}))
	if err != nil {
		return nil, rpcErr("list", err)
	}
	out := make([]ProcessInfo, 0, len(resp.Msg.GetProcesses()))
	for _, p := range resp.Msg.GetProcesses() {
		out = append(out, ProcessInfo{
			Pid: int(p.GetPid()), Cmd: p.GetConfig().GetCmd(), Args: p.GetConfig().GetArgs(),
			Tag: p.GetTag(), User: p.GetUsername(), StartedAt: time.UnixMilli(p.GetStartedUnixMs()),
		})
	}
	return out, nil
}

// Connect attaches to a running (or just ended) process by pid, replaying
// the output still held by rayd.
func (c *Commands) Connect(ctx context.Context, pid int, opts ...CommandOption) (*CommandHandle, error) {
	cc := commandOpts(opts)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := c.sbx.dp.process.Connect(sctx, connect.NewRequest(&raydv1.ConnectRequest{Pid: uint32(pid)}))
	if err != nil {
		cancel()
		return nil, rpcErr("connect", err)
	}
	if _, err := follow.Open(stream); err != nil {
		cancel()
		return nil, rpcErr("connect", err)
	}
	h := c.newHandle(sctx, cancel, pid, cc)
	go h.follow(sctx, stream)
	return h, nil
}

// capped is a byte buffer with a size cap.
type capped struct {
	buf       []byte
	truncated bool
}

func (c *capped) write(p []byte, max int) {
	if room := max - len(c.buf); room < len(p) {
		if room > 0 {
			c.buf = append(c.buf, p[:room]...)
		}
		c.truncated = true
		return
	}
	c.buf = append(c.buf, p...)
}
