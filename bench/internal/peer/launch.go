package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Server is an envd child process.
type Server struct {
	cmd    *exec.Cmd
	exited chan struct{}
	// Base is its URL, http://<address>:<port>.
	Base string
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Namespace is a network namespace of its own for the peer: envd listens
// on every interface and runs commands as root for anyone, so the harness
// never lets it listen on the machine's (localvmtest.PeerNet).
type Namespace interface {
	// Do runs f on an OS thread inside the namespace.
	Do(f func() error) error
	// Addr is where the harness reaches the peer.
	Addr() netip.Addr
}

// Launch starts `path -isnotfc -no-cgroups -port <free port>` (its output
// discarded: it may log commands) through start (e.g. a CPU pinner; nil
// means cmd.Start) and waits up to 15 s for GET /health to answer 2xx.
// With ns the peer is born in that network namespace and reached at its
// address; nil keeps it on this namespace's loopback (tests of the driver
// with a fake envd only).
func Launch(ctx context.Context, path string, start func(*exec.Cmd) error, ns Namespace) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "-isnotfc", "-no-cgroups", "-port", strconv.Itoa(port))
	// Own process group, so Close can end whatever it started too; the
	// kernel kills it if the harness dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if start == nil {
		start = (*exec.Cmd).Start
	}
	host := "127.0.0.1"
	run := func() error { return start(cmd) }
	if ns != nil {
		host = ns.Addr().String()
		inner := run
		run = func() error { return ns.Do(inner) }
	}
	if err := run(); err != nil {
		return nil, fmt.Errorf("peer: start %s: %w", path, err)
	}
	s := &Server{cmd: cmd, exited: make(chan struct{}), Base: "http://" + net.JoinHostPort(host, strconv.Itoa(port))}
	go func() { _ = cmd.Wait(); close(s.exited) }()

	c := NewClient(s.Base, "root")
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Health(hctx)
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("peer: %s exited before answering /health (%v)", path, cmd.ProcessState)
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Close()
			return nil, errors.New("peer: no 2xx from /health within 15 s: " + err.Error())
		}
	}
}

// Pid is the child's pid.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Close kills the child's process group and waits for the child.
func (s *Server) Close() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Process.Kill()
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
	}
}
