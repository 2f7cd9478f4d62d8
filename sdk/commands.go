package rayito

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// Commands runs processes in a sandbox.
type Commands struct {
	sbx *Sandbox
}

// CommandOption configures one command.
type CommandOption func(*commandConfig)

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
}

// WithCommandEnvs adds environment variables to this command only (the
// right place for a secret: it never enters the creation payload).
func WithCommandEnvs(envs map[string]string) CommandOption {
	return func(c *commandConfig) { c.envs = envs }
}

// WithCwd sets the working directory (relative paths are under HOME).
func WithCwd(dir string) CommandOption { return func(c *commandConfig) { c.cwd = &dir } }

// WithCommandUser runs the command as another account.
func WithCommandUser(user string) CommandOption { return func(c *commandConfig) { c.user = user } }

// WithCommandTimeout ends the command (SIGTERM, SIGKILL 5 s later) after d.
func WithCommandTimeout(d time.Duration) CommandOption {
	return func(c *commandConfig) { c.timeout = d }
}

// WithStdin gives the command a stdin pipe (SendStdin, CloseStdin);
// without it stdin is /dev/null.
func WithStdin() CommandOption { return func(c *commandConfig) { c.stdin = true } }

// WithTag labels the command in List.
func WithTag(tag string) CommandOption { return func(c *commandConfig) { c.tag = &tag } }

// OnStdout is called with each piece of stdout, in order.
func OnStdout(f func([]byte)) CommandOption { return func(c *commandConfig) { c.onStdout = f } }

// OnStderr is called with each piece of stderr, in order.
func OnStderr(f func([]byte)) CommandOption { return func(c *commandConfig) { c.onStderr = f } }

// WithMaxOutputBytes caps the output stored in the result per stream
// (default 64 MiB); callbacks still see everything.
func WithMaxOutputBytes(n int) CommandOption {
	return func(c *commandConfig) { c.maxOutputBytes = n }
}

// CommandResult is a finished command.
type CommandResult struct {
	Pid      int
	ExitCode int
	// Status is exited, signaled, timeout or output_truncated.
	Status string
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
func (c *Commands) Run(ctx context.Context, command string, opts ...CommandOption) (*CommandResult, error) {
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
	cc := &commandConfig{maxOutputBytes: MaxOutputBytes}
	for _, o := range opts {
		o(cc)
	}
	req := &raydv1.StartRequest{
		Process: &raydv1.ProcessConfig{Cmd: argv[0], Args: argv[1:], Envs: cc.envs, Cwd: cc.cwd},
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
	h := &CommandHandle{cmds: c, cfg: cc, cancel: cancel, done: make(chan struct{})}
	// The first message is start{pid}, or the start failed.
	if !stream.Receive() {
		cancel()
		err := stream.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, rpcErr("start", err)
	}
	st := stream.Msg().GetStart()
	if st == nil {
		cancel()
		return nil, rpcErr("start", errors.New("stream did not open with start"))
	}
	h.pid = int(st.GetPid())
	go h.follow(stream)
	return h, nil
}

// CommandHandle is a running command.
type CommandHandle struct {
	cmds   *Commands
	cfg    *commandConfig
	pid    int
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	lastSeq uint64
	stdout  capped
	stderr  capped
	result  *CommandResult
	err     error
}

// Pid is the process id in the sandbox.
func (h *CommandHandle) Pid() int { return h.pid }

// follow reads the stream until end, reattaching with from_seq when the
// connection drops before the end (a proxy reset, say).
func (h *CommandHandle) follow(stream *connect.ServerStreamForClient[raydv1.ProcessEvent]) {
	defer close(h.done)
	defer func() { h.cancel() }()
	const maxReattach = 5
	for attempt := 0; ; attempt++ {
		end, err := h.consume(stream)
		stream.Close()
		if end != nil {
			h.finish(end, nil)
			return
		}
		if attempt >= maxReattach || connect.CodeOf(err) == connect.CodeNotFound {
			h.finish(nil, rpcErr("follow", err))
			return
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		h.mu.Lock()
		from := h.lastSeq + 1
		h.mu.Unlock()
		sctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		next, cerr := h.cmds.sbx.dp.process.Connect(sctx, connect.NewRequest(&raydv1.ConnectRequest{Pid: uint32(h.pid), FromSeq: from}))
		if cerr != nil {
			cancel()
			h.finish(nil, rpcErr("reattach", cerr))
			return
		}
		stream = next
	}
}

// consume reads events until end (returned) or a stream error.
func (h *CommandHandle) consume(stream *connect.ServerStreamForClient[raydv1.ProcessEvent]) (*raydv1.EndEvent, error) {
	for stream.Receive() {
		switch ev := stream.Msg().Event.(type) {
		case *raydv1.ProcessEvent_Data:
			h.mu.Lock()
			if ev.Data.GetSeq() <= h.lastSeq {
				h.mu.Unlock()
				continue // replayed after a reattach
			}
			h.lastSeq = ev.Data.GetSeq()
			h.mu.Unlock()
			if out := ev.Data.GetStdout(); out != nil {
				h.stdout.write(out, h.cfg.maxOutputBytes)
				if h.cfg.onStdout != nil {
					h.cfg.onStdout(out)
				}
			}
			if out := ev.Data.GetStderr(); out != nil {
				h.stderr.write(out, h.cfg.maxOutputBytes)
				if h.cfg.onStderr != nil {
					h.cfg.onStderr(out)
				}
			}
		case *raydv1.ProcessEvent_End:
			drainStream(stream)
			return ev.End, nil
		}
	}
	err := stream.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, err
}

func (h *CommandHandle) finish(end *raydv1.EndEvent, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if end == nil {
		h.err = err
		return
	}
	res := &CommandResult{
		Pid: h.pid, ExitCode: int(end.GetExitCode()), Status: end.GetStatus(), Error: end.GetError(),
		Stdout: string(h.stdout.buf), Stderr: string(h.stderr.buf),
		StdoutTruncated: h.stdout.truncated, StderrTruncated: h.stderr.truncated,
	}
	h.result = res
	if res.ExitCode != 0 || res.Status != "exited" {
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
	cc := &commandConfig{maxOutputBytes: MaxOutputBytes}
	for _, o := range opts {
		o(cc)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := c.sbx.dp.process.Connect(sctx, connect.NewRequest(&raydv1.ConnectRequest{Pid: uint32(pid)}))
	if err != nil {
		cancel()
		return nil, rpcErr("connect", err)
	}
	if !stream.Receive() {
		cancel()
		return nil, rpcErr("connect", stream.Err())
	}
	h := &CommandHandle{cmds: c, cfg: cc, pid: pid, cancel: cancel, done: make(chan struct{})}
	go h.follow(stream)
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
