package rayito

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// Pty drives interactive terminals in a sandbox.
type Pty struct {
	sbx *Sandbox
}

// PtyOptions configure a new terminal.
type PtyOptions struct {
	// Cols and Rows are the window size (1 to 4096; zero means 80x24).
	Cols, Rows uint16
	// Envs are added to the shell's environment.
	Envs map[string]string
	// Cwd is the working directory (relative to HOME).
	Cwd string
	// User runs the shell as another account.
	User string
	// Shell replaces the user's login shell.
	Shell string
	// Timeout ends the shell after this long; zero means none.
	Timeout time.Duration
	// OnData receives the terminal's output, in order.
	OnData func([]byte)
}

// Create starts a login shell on a new terminal.
func (p *Pty) Create(ctx context.Context, opts PtyOptions) (*PtyHandle, error) {
	req := &raydv1.PtyStart{
		Size: &raydv1.PtySize{Cols: uint32(opts.Cols), Rows: uint32(opts.Rows)},
		Envs: opts.Envs,
	}
	if opts.Cwd != "" {
		req.Cwd = &opts.Cwd
	}
	if opts.User != "" {
		req.User = &raydv1.User{Username: opts.User}
	}
	if opts.Shell != "" {
		req.Shell = &opts.Shell
	}
	if opts.Timeout > 0 {
		req.TimeoutMs = uint64(opts.Timeout / time.Millisecond)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := p.sbx.dp.pty.Create(sctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		return nil, rpcErr("pty create", err)
	}
	return p.attach(stream, cancel, opts.OnData)
}

// Connect attaches to a running terminal by pid, replaying the output rayd
// still holds.
func (p *Pty) Connect(ctx context.Context, pid int, onData func([]byte)) (*PtyHandle, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := p.sbx.dp.pty.Connect(sctx, connect.NewRequest(&raydv1.ConnectRequest{Pid: uint32(pid)}))
	if err != nil {
		cancel()
		return nil, rpcErr("pty connect", err)
	}
	return p.attach(stream, cancel, onData)
}

func (p *Pty) attach(stream *connect.ServerStreamForClient[raydv1.PtyServerMessage], cancel context.CancelFunc, onData func([]byte)) (*PtyHandle, error) {
	if !stream.Receive() {
		cancel()
		err := stream.Err()
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, rpcErr("pty", err)
	}
	st := stream.Msg().GetStarted()
	if st == nil {
		cancel()
		return nil, rpcErr("pty", errors.New("stream did not open with started"))
	}
	h := &PtyHandle{pty: p, pid: int(st.GetPid()), onData: onData, cancel: cancel, done: make(chan struct{})}
	go h.follow(stream)
	return h, nil
}

// PtyHandle is a running terminal.
type PtyHandle struct {
	pty    *Pty
	pid    int
	onData func([]byte)
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	lastSeq uint64
	end     *raydv1.EndEvent
	err     error
}

// Pid is the shell's process id in the sandbox.
func (h *PtyHandle) Pid() int { return h.pid }

// follow delivers output until the end, reattaching with from_seq after a
// dropped connection.
func (h *PtyHandle) follow(stream *connect.ServerStreamForClient[raydv1.PtyServerMessage]) {
	defer close(h.done)
	defer func() { h.cancel() }()
	for attempt := 0; ; attempt++ {
		end, err := h.consume(stream)
		stream.Close()
		if end != nil || attempt >= 5 || connect.CodeOf(err) == connect.CodeNotFound {
			h.mu.Lock()
			h.end, h.err = end, nil
			if end == nil {
				h.err = rpcErr("pty", err)
			}
			h.mu.Unlock()
			return
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
		h.mu.Lock()
		from := h.lastSeq + 1
		h.mu.Unlock()
		sctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		next, cerr := h.pty.sbx.dp.pty.Connect(sctx, connect.NewRequest(&raydv1.ConnectRequest{Pid: uint32(h.pid), FromSeq: from}))
		if cerr != nil {
			cancel()
			h.mu.Lock()
			h.err = rpcErr("pty reattach", cerr)
			h.mu.Unlock()
			return
		}
		stream = next
	}
}

func (h *PtyHandle) consume(stream *connect.ServerStreamForClient[raydv1.PtyServerMessage]) (*raydv1.EndEvent, error) {
	for stream.Receive() {
		m := stream.Msg()
		switch ev := m.Event.(type) {
		case *raydv1.PtyServerMessage_Data:
			h.mu.Lock()
			dup := m.GetSeq() <= h.lastSeq
			if !dup {
				h.lastSeq = m.GetSeq()
			}
			h.mu.Unlock()
			if !dup && h.onData != nil {
				h.onData(ev.Data)
			}
		case *raydv1.PtyServerMessage_Exited:
			drainStream(stream)
			return ev.Exited, nil
		}
	}
	err := stream.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	return nil, err
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
		return fmt.Errorf("%w: terminal size must be 1..4096", ErrInvalidArgument)
	}
	_, err := h.pty.sbx.dp.pty.Resize(ctx, connect.NewRequest(&raydv1.ResizeRequest{Pid: uint32(h.pid), Size: &raydv1.PtySize{Cols: uint32(cols), Rows: uint32(rows)}}))
	return rpcErr("pty resize", err)
}

// Kill ends the terminal's process group with SIGKILL.
func (h *PtyHandle) Kill(ctx context.Context) error {
	_, err := h.pty.sbx.dp.pty.Kill(ctx, connect.NewRequest(&raydv1.KillRequest{Pid: uint32(h.pid)}))
	return rpcErr("pty kill", err)
}
