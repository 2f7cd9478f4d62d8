package envdprocess_test

// E2B envd's process behaviour as E2B's JS SDK suite expects it (issue
// 27), on a real rayd: stdin of a process without it, and Connect.

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/process"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

func stdinReq(pid uint32, data string) *process.SendInputRequest {
	return &process.SendInputRequest{Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}, Input: &process.ProcessInput{Input: &process.ProcessInput_Stdin{Stdin: []byte(data)}}}
}

// Stdin of a process without it: envd's Internal "stdin not enabled or
// closed" for SendInput, success for CloseStdin (also twice).
func TestE2BStdinAsEnvd(t *testing.T) {
	h := daemontest.New(t)
	h.Run(nil)
	c := h.EnvdProcess(raydtest.EnvdHeaders{Token: h.Token})
	ctx := context.Background()
	pid, s := startBackground(t, ctx, c, bashRun("sleep 30"))
	defer s.Close()
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	defer c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel, Signal: process.Signal_SIGNAL_SIGKILL}))
	_, err := c.SendInput(ctx, connect.NewRequest(stdinReq(pid, "x")))
	if raydtest.CodeOf(err) != connect.CodeInternal || !strings.Contains(err.Error(), "stdin not enabled or closed") {
		t.Errorf("SendInput without stdin: %v", err)
	}
	for range 2 {
		if _, err := c.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel})); err != nil {
			t.Errorf("CloseStdin without stdin: %v", err)
		}
	}
	on := true
	req := bashRun("cat >/dev/null; sleep 30")
	req.Stdin = &on
	pid2, s2 := startBackground(t, ctx, c, req)
	defer s2.Close()
	sel2 := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid2}}
	defer c.SendSignal(ctx, connect.NewRequest(&process.SendSignalRequest{Process: sel2, Signal: process.Signal_SIGNAL_SIGKILL}))
	for range 2 {
		if _, err := c.CloseStdin(ctx, connect.NewRequest(&process.CloseStdinRequest{Process: sel2})); err != nil {
			t.Errorf("CloseStdin: %v", err)
		}
	}
	if _, err := c.SendInput(ctx, connect.NewRequest(stdinReq(pid2, "x"))); raydtest.CodeOf(err) != connect.CodeInternal || !strings.Contains(err.Error(), "stdin not enabled or closed") {
		t.Errorf("SendInput after CloseStdin: %v", err)
	}
}

// Connect replays nothing, as envd: only what the process writes after
// the connect, then the end; an ended process gives start and end.
func TestE2BConnectNoReplay(t *testing.T) {
	h := daemontest.New(t)
	h.Run(nil)
	c := h.EnvdProcess(raydtest.EnvdHeaders{Token: h.Token})
	ctx := context.Background()
	pid, s := startBackground(t, ctx, c, bashRun("echo before; echo err1 >&2; sleep 1.5; echo after"))
	for s.Receive() {
		if strings.Contains(string(s.Msg().GetEvent().GetData().GetStdout()), "before") {
			break
		}
	}
	time.Sleep(300 * time.Millisecond)
	sel := &process.ProcessSelector{Selector: &process.ProcessSelector_Pid{Pid: pid}}
	cs, err := c.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatal(err)
	}
	r := collectEnvd(t, cs, nil)
	if r.err != nil || r.pid != pid || r.stdout != "after\n" || r.stderr != "" || r.end.GetExitCode() != 0 || !r.end.GetExited() {
		t.Fatalf("connect: %+v", r)
	}
	s.Close()
	cs, err = c.Connect(ctx, connect.NewRequest(&process.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatal(err)
	}
	r = collectEnvd(t, cs, nil)
	if r.err != nil || r.pid != pid || r.stdout != "" || r.end == nil || r.end.GetExitCode() != 0 {
		t.Fatalf("connect after the end: %+v", r)
	}
}
