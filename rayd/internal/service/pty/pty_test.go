package pty_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

func TestPtyEchoResizeListExit(t *testing.T) {
	t.Parallel()
	h := daemontest.New(t)
	h.Run(nil)
	c := h.Ptys()
	ctx := raydtest.TestCtx(t)
	m := raydtest.ShPty(t, ctx, c, nil)
	m.Send(c, "echo hi\n")
	// The terminal echoes the command line, then the shell prints hi (the
	// prompt may come anywhere in between: input can precede it).
	m.Until(`echo hi\r\n[\s\S]*hi\r\n`)
	m.Send(c, "stty size\n")
	m.Until(`24 80\r\n`)
	if _, err := c.Resize(ctx, connect.NewRequest(&raydv1.ResizeRequest{Pid: m.Pid, Size: &raydv1.PtySize{Cols: 132, Rows: 43}})); err != nil {
		t.Fatal(err)
	}
	m.Send(c, "stty size\n")
	m.Until(`43 132\r\n`)

	list, err := h.Processes().List(ctx, connect.NewRequest(&raydv1.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var mine *raydv1.ProcessInfo
	for _, p := range list.Msg.GetProcesses() {
		if p.GetPid() == m.Pid {
			mine = p
		}
	}
	if mine.GetKind() != raydv1.ProcessKind_PROCESS_KIND_PTY || mine.GetConfig().GetCmd() != "/bin/sh" {
		t.Fatalf("list entry %v", mine)
	}

	m.Send(c, "exit 3\n")
	m.Finish()
	if e := m.End; e.GetExitCode() != 3 || !e.GetExited() || e.GetStatus() != "exited" {
		t.Fatalf("end %v", e)
	}
	// Once ended, input, resize and kill are refused.
	if _, err := c.SendInput(ctx, connect.NewRequest(&raydv1.SendInputRequest{Pid: m.Pid, Data: []byte("x")})); raydtest.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("SendInput after the end: %v", err)
	}
	if _, err := c.Kill(ctx, connect.NewRequest(&raydv1.KillRequest{Pid: m.Pid})); raydtest.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("Kill after the end: %v", err)
	}
}

func TestPtyReconnectAndKill(t *testing.T) {
	t.Parallel()
	h := daemontest.New(t)
	h.Run(nil)
	c := h.Ptys()
	ctx, cancel := context.WithCancel(raydtest.TestCtx(t))
	m := raydtest.ShPty(t, ctx, c, &raydv1.PtySize{Cols: 100})
	m.Send(c, "echo $((20+1))\n")
	m.Until(`21\r\n`)
	before := m.Out.String()
	// Disconnect; the shell goes on and its output is kept.
	cancel()
	m.Close()
	m.Send(c, "echo $((40+2)); stty size\n")

	cc, err := c.Connect(raydtest.TestCtx(t), connect.NewRequest(&raydv1.ConnectRequest{Pid: m.Pid, FromSeq: m.LastSeq + 1}))
	if err != nil {
		t.Fatal(err)
	}
	again := raydtest.NewTerm(t, cc)
	again.LastSeq = m.LastSeq
	again.Until(`42\r\n24 100\r\n`)
	if strings.Contains(again.Out.String(), "21") {
		t.Fatalf("replay from %d repeated old output: %q", m.LastSeq+1, again.Out.String())
	}

	// from_seq 0 replays everything from seq 1.
	all, err := c.Connect(raydtest.TestCtx(t), connect.NewRequest(&raydv1.ConnectRequest{Pid: m.Pid}))
	if err != nil {
		t.Fatal(err)
	}
	whole := raydtest.NewTerm(t, all)
	whole.Until(`42\r\n24 100\r\n`)
	if !strings.HasPrefix(whole.Out.String(), before) {
		t.Fatalf("full replay %q does not start with %q", whole.Out.String(), before)
	}

	// An interactive shell ignores SIGTERM; Kill is SIGKILL.
	if _, err := c.Kill(raydtest.TestCtx(t), connect.NewRequest(&raydv1.KillRequest{Pid: m.Pid})); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*raydtest.Term{again, whole} {
		x.Finish()
		if e := x.End; e.GetStatus() != "signaled" || e.GetSignal() != 9 || e.GetExitCode() != 128+9 || e.GetExited() {
			t.Fatalf("end %v", e)
		}
	}

	// Out of range and unknown pids.
	bad, err := c.Connect(raydtest.TestCtx(t), connect.NewRequest(&raydv1.ConnectRequest{Pid: m.Pid, FromSeq: 1 << 40}))
	if err == nil {
		for bad.Receive() {
		}
		err = bad.Err()
	}
	if raydtest.CodeOf(err) != connect.CodeOutOfRange {
		t.Fatalf("from_seq past the end: %v", err)
	}
	const unknown = 1 << 30
	nf, err := c.Connect(raydtest.TestCtx(t), connect.NewRequest(&raydv1.ConnectRequest{Pid: unknown}))
	if err == nil {
		for nf.Receive() {
		}
		err = nf.Err()
	}
	if raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Connect to an unknown pid: %v", err)
	}
	if _, err := c.SendInput(raydtest.TestCtx(t), connect.NewRequest(&raydv1.SendInputRequest{Pid: unknown, Data: []byte("x")})); raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("SendInput to an unknown pid: %v", err)
	}
	if _, err := c.Resize(raydtest.TestCtx(t), connect.NewRequest(&raydv1.ResizeRequest{Pid: unknown, Size: &raydv1.PtySize{Cols: 10, Rows: 10}})); raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Resize of an unknown pid: %v", err)
	}
	if _, err := c.Kill(raydtest.TestCtx(t), connect.NewRequest(&raydv1.KillRequest{Pid: unknown})); raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("Kill of an unknown pid: %v", err)
	}
}

func TestPtyBadRequests(t *testing.T) {
	t.Parallel()
	h := daemontest.New(t)
	h.Run(nil)
	c := h.Ptys()
	ctx := raydtest.TestCtx(t)
	create := func(req *raydv1.PtyStart) error {
		s, err := c.Create(ctx, connect.NewRequest(req))
		if err != nil {
			return err
		}
		defer s.Close()
		for s.Receive() {
		}
		return s.Err()
	}
	cases := map[string]struct {
		req  *raydv1.PtyStart
		want connect.Code
	}{
		"cols too large":  {&raydv1.PtyStart{Size: &raydv1.PtySize{Cols: 4097, Rows: 24}}, connect.CodeInvalidArgument},
		"rows too large":  {&raydv1.PtyStart{Size: &raydv1.PtySize{Cols: 80, Rows: 1 << 16}}, connect.CodeInvalidArgument},
		"huge cols":       {&raydv1.PtyStart{Size: &raydv1.PtySize{Cols: 1<<16 + 80}}, connect.CodeInvalidArgument},
		"missing shell":   {&raydv1.PtyStart{Shell: raydtest.Ptr("/no/such/shell")}, connect.CodeNotFound},
		"empty shell":     {&raydv1.PtyStart{Shell: raydtest.Ptr("")}, connect.CodeInvalidArgument},
		"missing cwd":     {&raydv1.PtyStart{Cwd: raydtest.Ptr("/no/such/dir")}, connect.CodeNotFound},
		"root refused":    {&raydv1.PtyStart{User: &raydv1.User{Username: "root"}}, connect.CodePermissionDenied},
		"bad env name":    {&raydv1.PtyStart{Envs: map[string]string{"A=B": "x"}}, connect.CodeInvalidArgument},
		"timeout too big": {&raydv1.PtyStart{TimeoutMs: 1 << 62}, connect.CodeInvalidArgument},
	}
	for name, tc := range cases {
		if err := create(tc.req); raydtest.CodeOf(err) != tc.want {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}

	m := raydtest.ShPty(t, ctx, c, &raydv1.PtySize{Cols: 4096, Rows: 1})
	if _, err := c.Resize(ctx, connect.NewRequest(&raydv1.ResizeRequest{Pid: m.Pid, Size: &raydv1.PtySize{Cols: 4097, Rows: 10}})); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("Resize to 4097 columns: %v", err)
	}
	m.Send(c, "stty size\n")
	m.Until(`1 4096\r\n`)
	// Zero fields mean 80x24, as in Create.
	if _, err := c.Resize(ctx, connect.NewRequest(&raydv1.ResizeRequest{Pid: m.Pid})); err != nil {
		t.Fatal(err)
	}
	m.Send(c, "stty size; exit\n")
	m.Until(`24 80\r\n`)
	m.Finish()

	// A ProcessService process is not a PTY.
	ps, err := h.Processes().Start(ctx, connect.NewRequest(raydtest.Shell("sleep 30")))
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	if !ps.Receive() {
		t.Fatal(ps.Err())
	}
	pid := ps.Msg().GetStart().GetPid()
	defer h.Processes().SendSignal(context.Background(), connect.NewRequest(&raydv1.SendSignalRequest{Pid: pid, Signal: raydv1.Signal_SIGNAL_SIGKILL}))
	if _, err := c.SendInput(ctx, connect.NewRequest(&raydv1.SendInputRequest{Pid: pid, Data: []byte("x")})); raydtest.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("SendInput to a process: %v", err)
	}
	if _, err := c.Resize(ctx, connect.NewRequest(&raydv1.ResizeRequest{Pid: pid, Size: &raydv1.PtySize{Cols: 10, Rows: 10}})); raydtest.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("Resize of a process: %v", err)
	}
	if _, err := c.Kill(ctx, connect.NewRequest(&raydv1.KillRequest{Pid: pid})); raydtest.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("Kill of a process: %v", err)
	}
}

func TestPtyLoginShellAsUser(t *testing.T) {
	t.Parallel()
	raydtest.RequireRoot(t)
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash")
	}
	h := daemontest.New(t)
	h.Run(nil)
	c := h.Ptys()
	ctx := raydtest.TestCtx(t)
	s, err := c.Create(ctx, connect.NewRequest(&raydv1.PtyStart{Shell: raydtest.Ptr("bash")}))
	if err != nil {
		t.Fatal(err)
	}
	m := raydtest.NewTerm(t, s)
	// A login shell (argv[0] "-bash") as uid 1000, on a terminal it owns.
	m.Send(c, `echo "<$0:$(id -u):$TERM:$(stat -c %u "$(tty)")>"; exit`+"\n")
	m.Until(`[\r\n]<-bash:1000:xterm-256color:1000>\r\n`)
	m.Finish()
	if m.End.GetExitCode() != 0 {
		t.Fatalf("end %v", m.End)
	}
}

func TestPtyAuth(t *testing.T) {
	t.Parallel()
	h := daemontest.New(t)
	h.Run(nil)
	ctx := raydtest.TestCtx(t)
	noToken := raydv1connect.NewPtyServiceClient(h.Client, h.APIURL)
	s, err := noToken.Create(ctx, connect.NewRequest(&raydv1.PtyStart{}))
	if err == nil {
		for s.Receive() {
			t.Fatalf("message without token: %v", s.Msg())
		}
		err = s.Err()
	}
	if raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("Create without token: %v", err)
	}
	if _, err := noToken.SendInput(ctx, connect.NewRequest(&raydv1.SendInputRequest{Pid: 1, Data: []byte("x")})); raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("SendInput without token: %v", err)
	}
	if _, err := noToken.Kill(ctx, connect.NewRequest(&raydv1.KillRequest{Pid: 1})); raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("Kill without token: %v", err)
	}
	if got := h.Health().GetFeatures().GetServices(); !strings.Contains(strings.Join(got, ","), "pty") {
		t.Fatalf("features.services %v", got)
	}
}
