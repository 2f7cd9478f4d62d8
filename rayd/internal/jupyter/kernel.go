package jupyter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/rayito-dev/rayito/rayd/internal/proc"
)

// Defaults of Options.
const (
	DefaultStartTimeout   = 60 * time.Second
	DefaultInterruptGrace = 5 * time.Second
	// keyBytes is the size of the random HMAC key (hex-encoded in the
	// connection file, as Jupyter expects a string key).
	keyBytes = 32
	// inboxSize bounds the messages queued for one request before the
	// channel readers wait for its consumer.
	inboxSize = 1024
)

// Channel ports: with transport ipc they are the suffixes of the socket
// paths "<dir>/s-<port>".
const (
	shellPort   = 1
	iopubPort   = 2
	stdinPort   = 3
	controlPort = 4
	hbPort      = 5
)

// Options configure Start.
type Options struct {
	// Supervisor starts and reaps the kernel process; the kernel counts in
	// its process cap.
	Supervisor *proc.Supervisor
	// Spec returns the process to start given the connection file's
	// path (already built by the launch rules: identity, environment,
	// rlimits). Its Identity (nil: rayd's own) owns the kernel's directory.
	Spec func(connectionFile string) (proc.Spec, error)
	// BaseDir holds the kernels' directories; the kernel's uid must be able
	// to traverse it (0711), nobody else to list it.
	BaseDir string
	// StartTimeout bounds the start up to the first kernel_info reply.
	StartTimeout time.Duration
	// InterruptGrace is how long an interrupted request may take to end
	// before Execute gives up on it (Outcome.Stuck).
	InterruptGrace time.Duration
	// KernelName is written to the connection file ("python3").
	KernelName string
	// Spawn, when set, replaces Supervisor.Start(spec): it returns a
	// process that becomes the kernel (a preloaded interpreter told to
	// start it). The process must be the supervisor's, running as spec's
	// identity; Start still checks that through /proc.
	Spawn  func(spec proc.Spec) (*proc.Process, error)
	Logger *slog.Logger
}

// Kernel is one running Jupyter kernel and rayd's connections to it.
type Kernel struct {
	opts    Options
	key     []byte
	session string
	dir     string
	uid     uint32
	p       *proc.Process
	pin     pin

	ctx     context.Context
	cancel  context.CancelFunc
	sendMu  sync.Mutex
	shell   zmq4.Socket
	control zmq4.Socket
	iopub   zmq4.Socket
	readers sync.WaitGroup

	mu      sync.Mutex
	waiters map[string]chan Inbound

	dead      chan struct{} // closed once the process ended
	closed    chan struct{} // closed by Close
	closeOnce sync.Once
	dropped   atomic.Uint64
}

// Inbound is a message received for a pending request.
type Inbound struct {
	Channel string // "shell", "control" or "iopub"
	Msg     *Message
}

// Start creates the kernel's directory and connection file (with a fresh
// key), starts the kernel through the supervisor, connects to its channels
// and waits until it answers kernel_info.
func Start(ctx context.Context, opts Options) (_ *Kernel, err error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.InterruptGrace <= 0 {
		opts.InterruptGrace = DefaultInterruptGrace
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.KernelName == "" {
		opts.KernelName = "python3"
	}
	k := &Kernel{opts: opts, session: newID(), waiters: map[string]chan Inbound{}, dead: make(chan struct{}), closed: make(chan struct{})}
	k.ctx, k.cancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			k.Close()
		}
	}()
	// The placeholder spec tells who will own the directory.
	probe, err := opts.Spec("")
	if err != nil {
		return nil, err
	}
	k.uid, err = k.makeDir(probe)
	if err != nil {
		return nil, fmt.Errorf("%w: kernel directory: %w", ErrNotStarted, err)
	}
	raw := make([]byte, keyBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("%w: key: %w", ErrNotStarted, err)
	}
	k.key = []byte(hex.EncodeToString(raw))
	connFile := filepath.Join(k.dir, "connection.json")
	if err := k.writeConnectionFile(connFile, probe); err != nil {
		return nil, fmt.Errorf("%w: connection file: %w", ErrNotStarted, err)
	}
	spec, err := opts.Spec(connFile)
	if err != nil {
		return nil, err
	}
	if opts.Spawn != nil {
		k.p, err = opts.Spawn(spec)
	} else {
		k.p, err = opts.Supervisor.Start(spec)
	}
	if err != nil {
		return nil, err
	}
	go func() {
		select {
		case <-k.p.Done():
			close(k.dead)
		case <-k.closed:
			<-k.p.Done()
			close(k.dead)
		}
	}()
	if k.pin, err = readPin(k.p.Pid()); err != nil || k.pin.uid != k.uid || k.pin.ppid != os.Getpid() {
		return nil, fmt.Errorf("%w: cannot pin the kernel process", ErrNotStarted)
	}
	sctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := k.connect(sctx); err != nil {
		return nil, err
	}
	if err := k.handshake(sctx); err != nil {
		return nil, err
	}
	return k, nil
}

// makeDir creates the kernel's 0700 directory owned by the kernel's uid.
func (k *Kernel) makeDir(spec proc.Spec) (uint32, error) {
	dir, err := os.MkdirTemp(k.opts.BaseDir, "k-")
	if err != nil {
		return 0, err
	}
	k.dir = dir
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	if spec.Identity != nil {
		uid, gid = spec.Identity.UID, spec.Identity.GID
		if err := os.Lchown(dir, int(uid), int(gid)); err != nil {
			return 0, err
		}
	}
	return uid, os.Chmod(dir, 0o700)
}

// connectionInfo is the connection file's content.
type connectionInfo struct {
	Transport       string `json:"transport"`
	IP              string `json:"ip"`
	ShellPort       int    `json:"shell_port"`
	IOPubPort       int    `json:"iopub_port"`
	StdinPort       int    `json:"stdin_port"`
	ControlPort     int    `json:"control_port"`
	HBPort          int    `json:"hb_port"`
	Key             string `json:"key"`
	SignatureScheme string `json:"signature_scheme"`
	KernelName      string `json:"kernel_name"`
}

func (k *Kernel) socketPath(port int) string { return fmt.Sprintf("%s/s-%d", k.dir, port) }

// writeConnectionFile writes the 0600 connection file, owned by the
// kernel's uid (inside its 0700 directory).
func (k *Kernel) writeConnectionFile(path string, spec proc.Spec) error {
	info := connectionInfo{
		Transport: "ipc", IP: k.dir + "/s",
		ShellPort: shellPort, IOPubPort: iopubPort, StdinPort: stdinPort, ControlPort: controlPort, HBPort: hbPort,
		Key: string(k.key), SignatureScheme: "hmac-sha256", KernelName: k.opts.KernelName,
	}
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if spec.Identity != nil {
		if err := f.Chown(int(spec.Identity.UID), int(spec.Identity.GID)); err != nil {
			f.Close()
			return err
		}
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// quietLogger keeps zmq4 from logging anything of rayd's.
var quietLogger = log.New(io.Discard, "", 0)

// connect waits for the kernel's sockets and dials shell, control and
// iopub.
func (k *Kernel) connect(ctx context.Context) error {
	for _, port := range []int{shellPort, iopubPort, controlPort} {
		for {
			if _, err := os.Stat(k.socketPath(port)); err == nil {
				break
			}
			select {
			case <-k.dead:
				return fmt.Errorf("%w: the kernel exited while starting", ErrNotStarted)
			case <-ctx.Done():
				return fmt.Errorf("%w: the kernel did not bind its sockets in time", ErrNotStarted)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	opts := []zmq4.Option{zmq4.WithLogger(quietLogger), zmq4.WithDialerRetry(50 * time.Millisecond), zmq4.WithDialerMaxRetries(20)}
	k.shell = zmq4.NewDealer(k.ctx, opts...)
	k.control = zmq4.NewDealer(k.ctx, opts...)
	k.iopub = zmq4.NewSub(k.ctx, opts...)
	for _, c := range []struct {
		s    zmq4.Socket
		port int
	}{{k.shell, shellPort}, {k.control, controlPort}, {k.iopub, iopubPort}} {
		if err := c.s.Dial("ipc://" + k.socketPath(c.port)); err != nil {
			return fmt.Errorf("%w: dial: %w", ErrNotStarted, err)
		}
	}
	if err := k.iopub.SetOption(zmq4.OptionSubscribe, ""); err != nil {
		return fmt.Errorf("%w: subscribe: %w", ErrNotStarted, err)
	}
	for name, s := range map[string]zmq4.Socket{"shell": k.shell, "control": k.control, "iopub": k.iopub} {
		k.readers.Add(1)
		go k.read(name, s)
	}
	return nil
}

// read receives a channel's messages, drops those whose signature does not
// verify, and hands the rest to the request they answer.
func (k *Kernel) read(channel string, s zmq4.Socket) {
	defer k.readers.Done()
	for {
		msg, err := s.Recv()
		if err != nil {
			return
		}
		m, err := Decode(msg.Frames, k.key)
		if err != nil {
			// Logged at the first drop and every 1000th (never the content).
			if n := k.dropped.Add(1); n == 1 || n%1000 == 0 {
				k.opts.Logger.Warn("kernel: message dropped", "channel", channel, "reason", reasonOf(err), "dropped", n)
			}
			continue
		}
		k.mu.Lock()
		ch := k.waiters[m.ParentHeader.MsgID]
		k.mu.Unlock()
		if ch == nil {
			continue
		}
		select {
		case ch <- Inbound{Channel: channel, Msg: m}:
		case <-k.closed:
			return
		case <-k.dead:
			return
		}
	}
}

func reasonOf(err error) string {
	if errors.Is(err, ErrBadSignature) {
		return "bad_signature"
	}
	return "malformed"
}

// Dropped returns the number of incoming messages dropped (bad signature
// or malformed).
func (k *Kernel) Dropped() uint64 { return k.dropped.Load() }

// request sends a message of msgType on the shell or control channel and
// returns the channel its replies arrive on. Call the returned done when
// finished with it.
func (k *Kernel) request(control bool, msgType string, content any) (string, <-chan Inbound, func(), error) {
	m, err := newMessage(k.session, msgType, content)
	if err != nil {
		return "", nil, nil, err
	}
	frames, err := m.Encode(k.key)
	if err != nil {
		return "", nil, nil, err
	}
	id := m.Header.MsgID
	ch := make(chan Inbound, inboxSize)
	k.mu.Lock()
	k.waiters[id] = ch
	k.mu.Unlock()
	done := func() {
		k.mu.Lock()
		delete(k.waiters, id)
		k.mu.Unlock()
	}
	s := k.shell
	if control {
		s = k.control
	}
	k.sendMu.Lock()
	err = s.SendMulti(zmq4.NewMsgFrom(frames...))
	k.sendMu.Unlock()
	if err != nil {
		done()
		return "", nil, nil, fmt.Errorf("%w: send: %w", ErrDied, err)
	}
	return id, ch, done, nil
}

// handshake sends kernel_info until both its reply (shell) and a status
// for it (iopub) arrive: then the iopub subscription is live and no
// output of a later request can be missed.
func (k *Kernel) handshake(ctx context.Context) error {
	for {
		_, ch, done, err := k.request(false, "kernel_info_request", struct{}{})
		if err != nil {
			return fmt.Errorf("%w: %w", ErrNotStarted, err)
		}
		var reply, status bool
		retry := time.NewTimer(250 * time.Millisecond)
	wait:
		for !(reply && status) {
			select {
			case in := <-ch:
				switch {
				case in.Channel == "shell" && in.Msg.Header.MsgType == "kernel_info_reply":
					reply = true
				case in.Channel == "iopub" && in.Msg.Header.MsgType == "status":
					status = true
				}
			case <-retry.C:
				break wait
			case <-k.dead:
				done()
				return fmt.Errorf("%w: the kernel exited while starting", ErrNotStarted)
			case <-ctx.Done():
				done()
				return fmt.Errorf("%w: no kernel_info reply in time", ErrNotStarted)
			}
		}
		retry.Stop()
		done()
		if reply && status {
			return nil
		}
	}
}

// Pid returns the kernel's pid.
func (k *Kernel) Pid() int { return k.p.Pid() }

// Dir returns the kernel's private directory.
func (k *Kernel) Dir() string { return k.dir }

// Dead is closed once the kernel process has ended.
func (k *Kernel) Dead() <-chan struct{} { return k.dead }

// Alive reports whether the kernel process is still running.
func (k *Kernel) Alive() bool {
	select {
	case <-k.dead:
		return false
	default:
		return true
	}
}

// Interrupt sends SIGINT to the kernel's process group once /proc confirms
// the pid is still rayd's own child of the expected uid (T12).
func (k *Kernel) Interrupt() error { return k.signal(syscall.SIGINT) }

func (k *Kernel) signal(sig syscall.Signal) error {
	if !k.Alive() {
		return ErrDied
	}
	if err := k.pin.confirm(); err != nil {
		return err
	}
	return k.p.Signal(sig)
}

// Close kills the kernel (SIGKILL to its group, after the /proc check),
// waits for it, closes the connections and removes its directory. It is
// idempotent.
func (k *Kernel) Close() {
	k.closeOnce.Do(func() {
		close(k.closed)
		if k.p != nil {
			if k.Alive() {
				_ = k.signal(syscall.SIGKILL)
			}
			select {
			case <-k.dead:
			case <-time.After(10 * time.Second):
				k.opts.Logger.Warn("kernel: did not end after SIGKILL", "pid", k.p.Pid())
			}
		}
		k.cancel()
		for _, s := range []zmq4.Socket{k.shell, k.control, k.iopub} {
			if s != nil {
				_ = s.Close()
			}
		}
		k.readers.Wait()
		if k.dir != "" {
			_ = os.RemoveAll(k.dir)
		}
	})
}
