package envdprocess_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	"github.com/rayito-dev/rayito/proto/gen/envd/process/processconnect"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// The E2B shim's envd port, driven as the e2b JS SDK drives it: the
// Connect protocol with the JSON codec over HTTP/1.1, the access token in
// X-Access-Token and the user as Basic credentials.

// envdResult is a collected Start or Connect stream.
type envdResult struct {
	pid    uint32
	stdout string
	stderr string
	pty    string
	end    *process.ProcessEvent_EndEvent
	err    error
}

type eventStream interface {
	Receive() bool
	Err() error
	Close() error
}

// collectEnvd reads a stream of events to its end; first receives the
// events as they come (it may return false to stop reading).
func collectEnvd[T interface{ GetEvent() *process.ProcessEvent }](t *testing.T, s interface {
	eventStream
	Msg() T
}, each func(*process.ProcessEvent) bool) envdResult {
	t.Helper()
	defer s.Close()
	var r envdResult
	var out, errOut, pty strings.Builder
	n := 0
	for s.Receive() {
		ev := s.Msg().GetEvent()
		if n == 0 && ev.GetStart() == nil {
			t.Fatalf("first event is not start: %v", ev)
		}
		n++
		switch e := ev.GetEvent().(type) {
		case *process.ProcessEvent_Start:
			r.pid = e.Start.GetPid()
		case *process.ProcessEvent_Data:
			out.Write(e.Data.GetStdout())
			errOut.Write(e.Data.GetStderr())
			pty.Write(e.Data.GetPty())
		case *process.ProcessEvent_End:
			r.end = e.End
		}
		r.stdout, r.stderr, r.pty = out.String(), errOut.String(), pty.String()
		if each != nil && !each(ev) {
			return r
		}
	}
	r.err = s.Err()
	return r
}

func bashRun(script string) *process.StartRequest {
	f := false
	return &process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", script}}, Stdin: &f}
}

func TestE2BProcessRun(t *testing.T) {
	h := daemontest.New(t)
	h.Run(nil)
	c := h.EnvdProcess(raydtest.EnvdHeaders{Token: h.Token})
	ctx := context.Background()

	s, err := c.Start(ctx, connect.NewRequest(bashRun("echo out; echo err >&2; exit 3")))
	if err != nil {
		t.Fatal(err)
	}
	r := collectEnvd(t, s, nil)
	if r.err != nil {
		t.Fatalf("stream: %v", r.err)
	}
	if r.pid == 0 || r.stdout != "out\n" || r.stderr != "err\n" {
		t.Fatalf("pid %d stdout %q stderr %q", r.pid, r.stdout, r.stderr)
	}
	if e := r.end; e == nil || e.GetExitCode() != 3 || !e.GetExited() || e.GetStatus() != "exit status 3" || e.GetError() != "exit status 3" {
		t.Fatalf("end = %v", r.end)
	}

	s, err = c.Start(ctx, connect.NewRequest(bashRun("pwd; id -un")))
	if err != nil {
		t.Fatal(err)
	}
	r = collectEnvd(t, s, nil)
	if e := r.end; e == nil || e.GetExitCode() != 0 || !e.GetExited() || e.Error != nil {
		t.Fatalf("end = %v (%v)", r.end, r.err)
	}
	if r.stdout == "" {
		t.Fatal("no output from pwd")
	}

	// A missing cwd is invalid_argument naming the path.
	missing := "/nonexistent-e2b-cwd"
	req := bashRun("true")
	req.Process.Cwd = &missing
	s, err = c.Start(ctx, connect.NewRequest(req))
	if err == nil {
		r = collectEnvd(t, s, nil)
		err = r.err
	}
	if raydtest.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing cwd: %v", err)
	}

	// StreamInput is not implemented, with a message saying what to use.
	si := c.StreamInput(ctx)
	_ = si.Send(&process.StreamInputRequest{})
	_, err = si.CloseAndReceive()
	if raydtest.CodeOf(err) != connect.CodeUnimplemented || !strings.Contains(err.Error(), "SendInput") {
		t.Fatalf("StreamInput: %v", err)
	}
}

// startBackground starts script and returns its pid once the start event
// came, with the stream left open for the caller.
func startBackground(t *testing.T, ctx context.Context, c processconnect.ProcessClient, req *process.StartRequest) (uint32, *connect.ServerStreamForClient[process.StartResponse]) {
	t.Helper()
	s, err := c.Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Receive() {
		t.Fatalf("no start event: %v", s.Err())
	}
	pid := s.Msg().GetEvent().GetStart().GetPid()
	if pid == 0 {
		t.Fatalf("first event %v", s.Msg())
	}
	return pid, s
}

func TestE2BProcessKill(t *testing.T) {
	h := daemontest.New(t)
	h.Run(nil)
	c := h.EnvdProcess(raydtest.EnvdHeaders{Token: h.Token})
	ctx := context.Background()
	pid, s := startBackground(t, ctx, c, bashRun("sleep 30"))

	list, err := c.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range list.Msg.GetProcesses() {
		if p.GetConfig() == nil {
			t.Fatalf("process %d without config", p.GetPid())
		}
		if p.GetPid() == pid {
			found = true
			if p.GetConfig().GetCmd() != "/bin/bash" || strings.Join(p.GetConfig().GetArgs(), " ") != "-l -c sleep 30" {
				t.Fatalf("config = %v", p.GetConfig())
			}
		}
	}
	if !found {
		t.Fatalf("pid %d not listed: %v", pid, list.Msg)
	}

	kill := &process.SendSignalRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}, Signal: process.Signal_SIGNAL_SIGKILL}
	if _, err := c.SendSignal(ctx, connect.NewRequest(kill)); err != nil {
		t.Fatal(err)
	}
	var end *process.ProcessEvent_EndEvent
	for s.Receive() {
		if e := s.Msg().GetEvent().GetEnd(); e != nil {
			end = e
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if end == nil || end.GetExitCode() != -1 || end.GetExited() || end.GetStatus() != "signal: killed" || end.GetError() != "signal: killed" {
		t.Fatalf("end = %v", end)
	}
	// A second kill, or a kill of an unknown pid: not_found.
	_, err = c.SendSignal(ctx, connect.NewRequest(kill))
	if raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("second kill: %v", err)
	}
	kill.Process.Selector = &process.ProcessSelector_Pid{Pid: 1 << 30}
	_, err = c.SendSignal(ctx, connect.NewRequest(kill))
	if raydtest.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("unknown pid: %v", err)
	}
	// Connect to an unknown pid: not_found in the end of the stream.
	cs, err := c.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: 1 << 30}}}))
	if err == nil {
		for cs.Receive() {
		}
		err = cs.Err()
	}
	if raydtest.CodeOf(err) != connect.CodeNotFound || !strings.Contains(err.Error(), "process with pid") {
		t.Fatalf("connect to unknown pid: %v", err)
	}
}

func listed(t *testing.T, c processconnect.ProcessClient, pid uint32) bool {
	t.Helper()
	list, err := c.List(context.Background(), connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Msg.GetProcesses() {
		if p.GetPid() == pid {
			return true
		}
	}
	return false
}

// Connect-Timeout-Ms is the process's lifetime: it is killed when the
// deadline runs out, and the client sees deadline_exceeded.
func TestE2BProcessConnectTimeoutKills(t *testing.T) {
	h := daemontest.New(t)
	h.Run(nil)
	c := h.EnvdProcess(raydtest.EnvdHeaders{Token: h.Token})
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	pid, s := startBackground(t, ctx, c, bashRun("sleep 60"))
	for s.Receive() {
	}
	if raydtest.CodeOf(s.Err()) != connect.CodeDeadlineExceeded {
		t.Fatalf("stream: %v", s.Err())
	}
	s.Close()
	deadline := time.Now().Add(8 * time.Second)
	for listed(t, c, pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still listed after its Connect-Timeout-Ms", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A client that goes away does not kill the process; Connect reattaches.
func TestE2BProcessDisconnectKeepsRunning(t *testing.T) {
	h := daemontest.New(t)
	h.Run(nil)
	c := h.EnvdProcess(raydtest.EnvdHeaders{Token: h.Token, Keepalive: "1"})
	ctx, cancel := context.WithCancel(context.Background())
	pid, s := startBackground(t, ctx, c, bashRun("sleep 2.5; echo done"))
	cancel()
	s.Close()
	time.Sleep(300 * time.Millisecond)
	if !listed(t, c, pid) {
		t.Fatalf("pid %d gone after the client left", pid)
	}
	cs, err := c.Connect(context.Background(), connect.NewRequest(&process.ConnectRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}}))
	if err != nil {
		t.Fatal(err)
	}
	keepalives := 0
	r := collectEnvd(t, cs, func(ev *process.ProcessEvent) bool {
		if ev.GetKeepalive() != nil {
			keepalives++
		}
		return true
	})
	if r.err != nil || r.pid != pid || r.stdout != "done\n" || r.end.GetExitCode() != 0 {
		t.Fatalf("connect: %+v", r)
	}
	if keepalives == 0 {
		t.Fatal("no keepalive with Keepalive-Ping-Interval: 1 over 2 s of silence")
	}
}

func TestE2BProcessStdin(t *testing.T) {
	h := daemontest.New(t)
	h.Run(nil)
	c := h.EnvdProcess(raydtest.EnvdHeaders{Token: h.Token})
	ctx := context.Background()
	on := true
	req := bashRun("cat")
	req.Stdin = &on
	pid, s := startBackground(t, ctx, c, req)
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	if _, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("hello\n")}}})); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var end *process.ProcessEvent_EndEvent
	for s.Receive() {
		out.Write(s.Msg().GetEvent().GetData().GetStdout())
		if e := s.Msg().GetEvent().GetEnd(); e != nil {
			end = e
		}
	}
	if out.String() != "hello\n" || end.GetExitCode() != 0 {
		t.Fatalf("stdout %q end %v err %v", out.String(), end, s.Err())
	}

	// Without stdin: SendInput is refused.
	pid, s = startBackground(t, ctx, c, bashRun("sleep 5"))
	defer s.Close()
	sel = &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	_, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte("x")}}}))
	if err == nil {
		t.Fatal("SendInput to a process without stdin accepted")
	}
	_, _ = c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: process.Signal_SIGNAL_SIGKILL}))
}

func TestE2BProcessPTY(t *testing.T) {
	h := daemontest.New(t)
	h.Run(nil)
	c := h.EnvdProcess(raydtest.EnvdHeaders{Token: h.Token})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := &process.StartRequest{
		Process: &process.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "stty size; read x; stty size"}, Envs: map[string]string{"LC_ALL": "C.UTF-8"}},
		Pty:     &process.PTY{Size: &process.PTY_Size{Cols: 100, Rows: 30}},
	}
	pid, s := startBackground(t, ctx, c, req)
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	var out strings.Builder
	resized := false
	var end *process.ProcessEvent_EndEvent
	for s.Receive() {
		ev := s.Msg().GetEvent()
		out.Write(ev.GetData().GetPty())
		if ev.GetData().GetStdout() != nil {
			t.Fatal("a PTY's output came as stdout")
		}
		if !resized && strings.Contains(out.String(), "30 100") {
			resized = true
			if _, err := c.Update(ctx, connect.NewRequest(&process.UpdateRequest{Process: sel, Pty: &process.PTY{Size: &process.PTY_Size{Cols: 120, Rows: 40}}})); err != nil {
				t.Fatal(err)
			}
			if _, err := c.SendInput(ctx, connect.NewRequest(&process.SendInputRequest{Process: sel, Input: &process.ProcessInput{Input: &process.ProcessInput_Pty{Pty: []byte("\n")}}})); err != nil {
				t.Fatal(err)
			}
		}
		if e := ev.GetEnd(); e != nil {
			end = e
		}
	}
	if s.Err() != nil || end.GetExitCode() != 0 {
		t.Fatalf("stream %v end %v output %q", s.Err(), end, out.String())
	}
	if !resized || !strings.Contains(out.String(), "40 120") {
		t.Fatalf("sizes not seen by stty: %q", out.String())
	}
}

// The user comes from Basic credentials, under rayd's identity rules.
func TestE2BProcessUser(t *testing.T) {
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	ctx := context.Background()
	s, err := h.EnvdProcess(raydtest.EnvdHeaders{Token: h.Token}).Start(ctx, connect.NewRequest(bashRun("id -u")))
	if err != nil {
		t.Fatal(err)
	}
	if r := collectEnvd(t, s, nil); r.stdout != "1000\n" {
		t.Fatalf("default user: id -u = %q (%v)", r.stdout, r.err)
	}
	// root needs RAYITO_ALLOW_ROOT=1, as on rayd's own API.
	s, err = h.EnvdProcess(raydtest.EnvdHeaders{Token: h.Token, User: "root"}).Start(ctx, connect.NewRequest(bashRun("id -u")))
	if err == nil {
		err = collectEnvd(t, s, nil).err
	}
	if raydtest.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("root without RAYITO_ALLOW_ROOT: %v", err)
	}
}

// Without the token every RPC is unauthenticated, before and after /run.
func TestE2BProcessNoToken(t *testing.T) {
	h := daemontest.New(t)
	ctx := context.Background()
	c := h.EnvdProcess(raydtest.EnvdHeaders{Token: h.Token})
	if _, err := c.List(ctx, connect.NewRequest(&process.ListRequest{})); raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("before /run: %v", err)
	}
	h.Run(nil)
	bad := h.EnvdProcess(raydtest.EnvdHeaders{})
	if _, err := bad.List(ctx, connect.NewRequest(&process.ListRequest{})); raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("no token: %v", err)
	}
	s, err := bad.Start(ctx, connect.NewRequest(bashRun("true")))
	if err == nil {
		for s.Receive() {
			t.Fatal("an event without a token")
		}
		err = s.Err()
	}
	if raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("Start without a token: %v", err)
	}
	if _, err := c.List(ctx, connect.NewRequest(&process.ListRequest{})); err != nil {
		t.Fatalf("with the token: %v", err)
	}
}
