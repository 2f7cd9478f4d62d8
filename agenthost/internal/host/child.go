package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/agenthost/secretenv"
)

// supervisor runs the agent, restarts it when it ends (1 s, doubling to
// 30 s, reset after a minute up) and tracks its readiness: ready once its
// GET /ping answers 200.
type supervisor struct {
	command      []string
	dir          string
	env          []string
	port         int
	cred         *syscall.Credential
	stdout       io.Writer
	stderr       io.Writer
	log          *slog.Logger
	redactor     *secretenv.Redactor
	startTimeout time.Duration

	ready   atomic.Bool
	busy    atomic.Bool
	changed atomic.Int64 // unix seconds of the last readiness change
}

// maxBackoff bounds the wait between restarts.
const maxBackoff = 30 * time.Second

// stopGrace is how long the agent has to end after SIGTERM.
const stopGrace = 10 * time.Second

func (s *supervisor) run(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		started := time.Now()
		code := s.once(ctx)
		s.setReady(false)
		if ctx.Err() != nil {
			return
		}
		s.log.Info("agent_exited", "code", code, "uptime_s", int(time.Since(started).Seconds()))
		if time.Since(started) > time.Minute {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (s *supervisor) setReady(v bool) {
	if s.ready.Swap(v) != v {
		s.changed.Store(time.Now().Unix())
	}
}

// once runs the agent until it ends or ctx does, and returns its exit
// code (-1 when it could not start or was killed by a signal).
func (s *supervisor) once(ctx context.Context) int {
	out := &startupWriter{w: s.stdout, redactor: s.redactor}
	errw := &startupWriter{w: s.stderr, redactor: s.redactor}
	cmd := exec.Command(s.command[0], s.command[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = s.dir, s.env, out, errw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: s.cred}
	if err := cmd.Start(); err != nil {
		// The error names the program only (exec's message); no
		// argument or environment.
		s.log.Info("agent_start_failed", "reason", startFailure(err))
		return -1
	}
	s.log.Info("agent_started", "pid", cmd.Process.Pid)
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(waited)
	}()
	readyCtx, cancelReady := context.WithCancel(ctx)
	defer cancelReady()
	go s.watch(readyCtx, cmd.Process.Pid, waited, out, errw)
	select {
	case <-waited:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(stopGrace):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-waited
		}
	}
	// Anything the agent left in its group goes with it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	out.flush()
	errw.flush()
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Exited() {
		return st.ExitStatus()
	}
	return -1
}

// startFailure is a closed reason for an exec failure.
func startFailure(err error) string {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, syscall.ENOENT):
		return "not_found"
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return "permission_denied"
	}
	return "exec_failed"
}

// watch polls the agent's /ping until it answers 200 (the start-up ends:
// its output is no longer redacted), then every 5 s while it runs. A
// start that passes startTimeout kills the agent's group (the
// supervisor restarts it).
func (s *supervisor) watch(ctx context.Context, pid int, waited <-chan struct{}, outs ...*startupWriter) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) + "/ping"
	deadline := time.Now().Add(s.startTimeout)
	tick := 100 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-waited:
			return
		case <-time.After(tick):
		}
		ok, busy := s.probe(ctx, client, url)
		switch {
		case ok && !s.ready.Load():
			for _, o := range outs {
				o.started()
			}
			s.setReady(true)
			s.log.Info("agent_ready")
			tick = 5 * time.Second
		case !ok && s.ready.Load():
			s.setReady(false)
			s.log.Info("agent_unhealthy")
			tick, deadline = 100*time.Millisecond, time.Now().Add(s.startTimeout)
		case !ok && time.Now().After(deadline):
			s.log.Info("agent_start_timeout")
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			return
		}
		s.busy.Store(ok && busy)
	}
}

// probe is one GET /ping: up (200), and busy (its JSON status
// HealthyBusy).
func (s *supervisor) probe(ctx context.Context, client *http.Client, url string) (bool, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false, false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body)
	return resp.StatusCode == http.StatusOK, body.Status == "HealthyBusy"
}

// startupWriter passes the agent's output on; until the agent is up it
// holds each line and redacts the secret values from it first (start-up
// diagnostics such as a stack trace that printed the environment).
type startupWriter struct {
	mu       sync.Mutex
	w        io.Writer
	redactor *secretenv.Redactor
	up       bool
	line     []byte
}

// maxHeldLine bounds a held line: a longer one is redacted and written in
// pieces (a value split across the cut could then pass: none is this
// long, see secretenv.MaxValueBytes).
const maxHeldLine = 2 * secretenv.MaxValueBytes

func (s *startupWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up {
		return s.w.Write(p)
	}
	s.line = append(s.line, p...)
	for {
		i := bytes.IndexByte(s.line, '\n')
		if i < 0 {
			break
		}
		_, _ = io.WriteString(s.w, s.redactor.Redact(string(s.line[:i+1])))
		s.line = s.line[i+1:]
	}
	if len(s.line) > maxHeldLine {
		_, _ = io.WriteString(s.w, s.redactor.Redact(string(s.line)))
		s.line = nil
	}
	return len(p), nil
}

// started ends the start-up: what is held is redacted and written, what
// follows passes as it is.
func (s *startupWriter) started() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.line) > 0 {
		_, _ = io.WriteString(s.w, s.redactor.Redact(string(s.line)))
		s.line = nil
	}
	s.up = true
}

func (s *startupWriter) flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.line) > 0 {
		_, _ = io.WriteString(s.w, s.redactor.Redact(string(s.line)))
		s.line = nil
	}
}
