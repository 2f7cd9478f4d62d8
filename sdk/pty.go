package rayito

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/sdk/internal/follow"
)

// Pty drives interactive terminals in a sandbox.
type Pty struct {
	sbx *Sandbox
}

type ptyConfig struct {
	cols, rows uint16
	envs       map[string]string
	cwd        string
	user       string
	shell      string
	timeout    time.Duration
	onData     func([]byte)

	callExts // the extensions' values (sdk/secrets' WithSecrets)
}

// ptyOption is a PtyOption made of a function.
type ptyOption func(*ptyConfig)

func (f ptyOption) applyPty(c *ptyConfig) { f(c) }

// WithSize sets the window size (1 to 4096 columns and rows; the default,
// and zero, is 80x24).
func WithSize(cols, rows uint16) PtyOption {
	return ptyOption(func(c *ptyConfig) { c.cols, c.rows = cols, rows })
}

// WithShell replaces the user's login shell.
func WithShell(shell string) PtyOption { return ptyOption(func(c *ptyConfig) { c.shell = shell }) }

// OnData receives the terminal's output, in order.
func OnData(f func([]byte)) PtyOption { return ptyOption(func(c *ptyConfig) { c.onData = f }) }

func ptyOpts(opts []PtyOption) *ptyConfig {
	c := &ptyConfig{}
	for _, o := range opts {
		if o != nil {
			o.applyPty(c)
		}
	}
	return c
}

// Create starts a login shell on a new terminal. WithSize, WithEnvs,
// WithCwd, WithUser, WithShell, WithTimeout and OnData configure it.
func (p *Pty) Create(ctx context.Context, opts ...PtyOption) (*PtyHandle, error) {
	c := ptyOpts(opts)
	envs, err := p.sbx.extensionEnvs(ctx, maps.Clone(c.envs), c.exts)
	if err != nil {
		return nil, err
	}
	req := &raydv1.PtyStart{
		Size: &raydv1.PtySize{Cols: uint32(c.cols), Rows: uint32(c.rows)},
		Envs: envs,
	}
	if c.cwd != "" {
		req.Cwd = &c.cwd
	}
	if c.user != "" {
		req.User = &raydv1.User{Username: c.user}
	}
	if c.shell != "" {
		req.Shell = &c.shell
	}
	if c.timeout > 0 {
		req.TimeoutMs = uint64(c.timeout / time.Millisecond)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := p.sbx.dp.pty.Create(sctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		return nil, rpcErr("pty create", err)
	}
	return p.attach(sctx, cancel, stream, c.onData)
}

// Connect attaches to a running terminal by pid, replaying the output rayd
// still holds. OnData receives it.
func (p *Pty) Connect(ctx context.Context, pid int, opts ...PtyOption) (*PtyHandle, error) {
	c := ptyOpts(opts)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := p.sbx.dp.pty.Connect(sctx, connect.NewRequest(&raydv1.ConnectRequest{Pid: uint32(pid)}))
	if err != nil {
		cancel()
		return nil, rpcErr("pty connect", err)
	}
	return p.attach(sctx, cancel, stream, c.onData)
}

// ptyShape reads PtyService streams.
var ptyShape = follow.Shape[raydv1.PtyServerMessage]{
	Seq: func(m *raydv1.PtyServerMessage) (uint64, bool) {
		if _, ok := m.Event.(*raydv1.PtyServerMessage_Data); ok {
			return m.GetSeq(), true
		}
		return 0, false
	},
	End:       func(m *raydv1.PtyServerMessage) bool { end, _ := endEvent(m.GetExited()); return end },
	Cut:       func(m *raydv1.PtyServerMessage) bool { _, cut := endEvent(m.GetExited()); return cut },
	Keepalive: func(m *raydv1.PtyServerMessage) bool { return m.GetKeepalive() != nil },
}

func (p *Pty) attach(ctx context.Context, cancel context.CancelFunc, stream *connect.ServerStreamForClient[raydv1.PtyServerMessage], onData func([]byte)) (*PtyHandle, error) {
	first, err := follow.Open(stream)
	if err != nil {
		cancel()
		return nil, rpcErr("pty", err)
	}
	st := first.GetStarted()
	if st == nil {
		cancel()
		stream.Close()
		return nil, rpcErr("pty", errors.New("stream did not open with started"))
	}
	pid := int(st.GetPid())
	h := &PtyHandle{pty: p, pid: pid, cancel: cancel, done: make(chan struct{})}
	h.fol = &follow.Follower[raydv1.PtyServerMessage]{
		Shape: ptyShape,
		Env:   p.sbx.followEnv("pty"),
		Attach: func(ctx context.Context, from uint64) (*connect.ServerStreamForClient[raydv1.PtyServerMessage], error) {
			return p.sbx.dp.pty.Connect(ctx, connect.NewRequest(&raydv1.ConnectRequest{Pid: uint32(pid), FromSeq: from}))
		},
	}
	if onData != nil {
		h.fol.OnData = func(m *raydv1.PtyServerMessage) { onData(m.GetData()) }
	}
	go h.follow(ctx, stream)
	return h, nil
}

// PtyHandle is a running terminal.
type PtyHandle struct {
	pty    *Pty
	pid    int
	cancel context.CancelFunc
	done   chan struct{}
	fol    *follow.Follower[raydv1.PtyServerMessage]

	mu  sync.Mutex
	end *raydv1.EndEvent
	err error
}

// Pid is the shell's process id in the sandbox.
func (h *PtyHandle) Pid() int { return h.pid }

// follow runs the follower to the end.
func (h *PtyHandle) follow(ctx context.Context, stream *connect.ServerStreamForClient[raydv1.PtyServerMessage]) {
	defer close(h.done)
	defer h.cancel()
	last, err := h.fol.Run(ctx, stream)
	h.mu.Lock()
	h.end, h.err = last.GetExited(), err
	h.mu.Unlock()
}

// Wait waits for the shell to end and returns its exit code (128+signal
// when a signal ended it).
func (h *PtyHandle) Wait(ctx context.Context) (int, error) {
	select {
	case <-h.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return 0, h.err
	}
	return int(h.end.GetExitCode()), nil
}

// SendInput writes keystrokes.
func (h *PtyHandle) SendInput(ctx context.Context, data []byte) error {
	_, err := h.pty.sbx.dp.pty.SendInput(ctx, connect.NewRequest(&raydv1.SendInputRequest{Pid: uint32(h.pid), Data: data}))
	return rpcErr("pty input", err)
}

// Resize changes the window size (1 to 4096 columns and rows).
func (h *PtyHandle) Resize(ctx context.Context, cols, rows uint16) error {
	if cols == 0 || rows == 0 || cols > 4096 || rows > 4096 {
		return newError(ReasonInvalidArgument, "terminal size must be 1..4096 columns and rows")
	}
	_, err := h.pty.sbx.dp.pty.Resize(ctx, connect.NewRequest(&raydv1.ResizeRequest{Pid: uint32(h.pid), Size: &raydv1.PtySize{Cols: uint32(cols), Rows: uint32(rows)}}))
	return rpcErr("pty resize", err)
}

// Kill ends the terminal's process group with SIGKILL.
func (h *PtyHandle) Kill(ctx context.Context) error {
	_, err := h.pty.sbx.dp.pty.Kill(ctx, connect.NewRequest(&raydv1.KillRequest{Pid: uint32(h.pid)}))
	return rpcErr("pty kill", err)
}
