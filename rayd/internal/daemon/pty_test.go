package daemon

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
)

func (h *harness) ptys(opts ...connect.ClientOption) raydv1connect.PtyServiceClient {
	return raydv1connect.NewPtyServiceClient(h.client, h.apiURL, append([]connect.ClientOption{withToken(h.token)}, opts...)...)
}

// term reads a PTY stream.
type term struct {
	t       *testing.T
	s       *connect.ServerStreamForClient[raydv1.PtyServerMessage]
	pid     uint32
	out     strings.Builder
	lastSeq uint64
	end     *raydv1.EndEvent
}

// newTerm checks the stream's first message (started{pid}).
func newTerm(t *testing.T, s *connect.ServerStreamForClient[raydv1.PtyServerMessage]) *term {
	t.Helper()
	if !s.Receive() {
		t.Fatalf("no first message: %v", s.Err())
	}
	st := s.Msg().GetStarted()
	if st == nil || st.GetPid() == 0 {
		t.Fatalf("first message %v", s.Msg())
	}
	t.Cleanup(func() { s.Close() })
	return &term{t: t, s: s, pid: st.GetPid()}
}

// receive handles one message; false at the end of the stream.
func (m *term) receive() bool {
	m.t.Helper()
	if !m.s.Receive() {
		if err := m.s.Err(); err != nil {
			m.t.Fatalf("stream: %v; output %q", err, m.out.String())
		}
		return false
	}
	switch e := m.s.Msg().Event.(type) {
	case *raydv1.PtyServerMessage_Data:
		if seq := m.s.Msg().GetSeq(); seq != m.lastSeq+1 && m.lastSeq != 0 || seq == 0 {
			m.t.Fatalf("seq %d after %d", seq, m.lastSeq)
		}
		m.lastSeq = m.s.Msg().GetSeq()
		m.out.Write(e.Data)
	case *raydv1.PtyServerMessage_Exited:
		if m.end != nil {
			m.t.Fatal("second exited")
		}
		m.end = e.Exited
	case *raydv1.PtyServerMessage_Started:
		m.t.Fatal("second started")
	}
	return true
}

// until reads until the output matches re.
func (m *term) until(re string) {
	m.t.Helper()
	rx := regexp.MustCompile(re)
	for !rx.MatchString(m.out.String()) {
		if !m.receive() || m.end != nil {
			m.t.Fatalf("waiting for %q; output %q, end %v", re, m.out.String(), m.end)
		}
	}
}

// finish reads to the end of the stream.
func (m *term) finish() {
	m.t.Helper()
	for m.receive() {
	}
	if m.end == nil {
		m.t.Fatalf("stream ended without exited; output %q", m.out.String())
	}
}

func (m *term) send(c raydv1connect.PtyServiceClient, input string) {
	m.t.Helper()
	if _, err := c.SendInput(context.Background(), connect.NewRequest(&raydv1.SendInputRequest{Pid: m.pid, Data: []byte(input)})); err != nil {
		m.t.Fatalf("SendInput: %v", err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// shPty starts /bin/sh on a PTY with a fixed prompt.
func shPty(t *testing.T, ctx context.Context, c raydv1connect.PtyServiceClient, size *raydv1.PtySize) *term {
	t.Helper()
	s, err := c.Create(ctx, connect.NewRequest(&raydv1.PtyStart{Shell: ptr("/bin/sh"), Size: size, Envs: map[string]string{"PS1": "$ "}}))
	if err != nil {
		t.Fatal(err)
	}
	return newTerm(t, s)
}

func TestPtyEchoResizeListExit(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(nil)
	c := h.ptys()
	ctx := testCtx(t)
	m := shPty(t, ctx, c, nil)
	m.send(c, "echo hi\n")
	// The terminal echoes the command line, then the shell prints hi (the
	// prompt may come anywhere in between: input can precede it).
	m.until(`echo hi\r\n[\s\S]*hi\r\n`)
	m.send(c, "stty size\n")
	m.until(`24 80\r\n`)
	if _, err := c.Resize(ctx, connect.NewRequest(&raydv1.ResizeRequest{Pid: m.pid, Size: &raydv1.PtySize{Cols: 132, Rows: 43}})); err != nil {
		t.Fatal(err)
	}
	m.send(c, "stty size\n")
	m.until(`43 132\r\n`)

	list, err := h.processes().List(ctx, connect.NewRequest(&raydv1.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var mine *raydv1.ProcessInfo
	for _, p := range list.Msg.GetProcesses() {
		if p.GetPid() == m.pid {
			mine = p
		}
	}
	if mine.GetKind() != raydv1.ProcessKind_PROCESS_KIND_PTY || mine.GetConfig().GetCmd() != "/bin/sh" {
		t.Fatalf("list entry %v", mine)
	}

	m.send(c, "exit 3\n")
	m.finish()
	if e := m.end; e.GetExitCode() != 3 || !e.GetExited() || e.GetStatus() != "exited" {
		t.Fatalf("end %v", e)
	}
	// Once ended, input, resize and kill are refused.
	if _, err := c.SendInput(ctx, connect.NewRequest(&raydv1.SendInputRequest{Pid: m.pid, Data: []byte("x")})); code(err) != connect.CodeFailedPrecondition {
		t.Fatalf("SendInput after the end: %v", err)
	}
	if _, err := c.Kill(ctx, connect.NewRequest(&raydv1.KillRequest{Pid: m.pid})); code(err) != connect.CodeFailedPrecondition {
		t.Fatalf("Kill after the end: %v", err)
	}
}

func TestPtyReconnectAndKill(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(nil)
	c := h.ptys()
	ctx, cancel := context.WithCancel(testCtx(t))
	m := shPty(t, ctx, c, &raydv1.PtySize{Cols: 100})
	m.send(c, "echo $((20+1))\n")
	m.until(`21\r\n`)
	before := m.out.String()
	// Disconnect; the shell goes on and its output is kept.
	cancel()
	m.s.Close()
	m.send(c, "echo $((40+2)); stty size\n")

	cc, err := c.Connect(testCtx(t), connect.NewRequest(&raydv1.ConnectRequest{Pid: m.pid, FromSeq: m.lastSeq + 1}))
	if err != nil {
		t.Fatal(err)
	}
	again := newTerm(t, cc)
	again.lastSeq = m.lastSeq
	again.until(`42\r\n24 100\r\n`)
	if strings.Contains(again.out.String(), "21") {
		t.Fatalf("replay from %d repeated old output: %q", m.lastSeq+1, again.out.String())
	}

	// from_seq 0 replays everything from seq 1.
	all, err := c.Connect(testCtx(t), connect.NewRequest(&raydv1.ConnectRequest{Pid: m.pid}))
	if err != nil {
		t.Fatal(err)
	}
	whole := newTerm(t, all)
	whole.until(`42\r\n24 100\r\n`)
	if !strings.HasPrefix(whole.out.String(), before) {
		t.Fatalf("full replay %q does not start with %q", whole.out.String(), before)
	}

	// An interactive shell ignores SIGTERM; Kill is SIGKILL.
	if _, err := c.Kill(testCtx(t), connect.NewRequest(&raydv1.KillRequest{Pid: m.pid})); err != nil {
		t.Fatal(err)
	}
	for _, x := range []*term{again, whole} {
		x.finish()
		if e := x.end; e.GetStatus() != "signaled" || e.GetSignal() != 9 || e.GetExitCode() != 128+9 || e.GetExited() {
			t.Fatalf("end %v", e)
		}
	}

	// Out of range and unknown pids.
	bad, err := c.Connect(testCtx(t), connect.NewRequest(&raydv1.ConnectRequest{Pid: m.pid, FromSeq: 1 << 40}))
	if err == nil {
		for bad.Receive() {
		}
		err = bad.Err()
	}
	if code(err) != connect.CodeOutOfRange {
		t.Fatalf("from_seq past the end: %v", err)
	}
	const unknown = 1 << 30
	nf, err := c.Connect(testCtx(t), connect.NewRequest(&raydv1.ConnectRequest{Pid: unknown}))
	if err == nil {
		for nf.Receive() {
		}
		err = nf.Err()
	}
	if code(err) != connect.CodeNotFound {
		t.Fatalf("Connect to an unknown pid: %v", err)
	}
	if _, err := c.SendInput(testCtx(t), connect.NewRequest(&raydv1.SendInputRequest{Pid: unknown, Data: []byte("x")})); code(err) != connect.CodeNotFound {
		t.Fatalf("SendInput to an unknown pid: %v", err)
	}
	if _, err := c.Resize(testCtx(t), connect.NewRequest(&raydv1.ResizeRequest{Pid: unknown, Size: &raydv1.PtySize{Cols: 10, Rows: 10}})); code(err) != connect.CodeNotFound {
		t.Fatalf("Resize of an unknown pid: %v", err)
	}
	if _, err := c.Kill(testCtx(t), connect.NewRequest(&raydv1.KillRequest{Pid: unknown})); code(err) != connect.CodeNotFound {
		t.Fatalf("Kill of an unknown pid: %v", err)
	}
}

func TestPtyBadRequests(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(nil)
	c := h.ptys()
	ctx := testCtx(t)
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
		"missing shell":   {&raydv1.PtyStart{Shell: ptr("/no/such/shell")}, connect.CodeNotFound},
		"empty shell":     {&raydv1.PtyStart{Shell: ptr("")}, connect.CodeInvalidArgument},
		"missing cwd":     {&raydv1.PtyStart{Cwd: ptr("/no/such/dir")}, connect.CodeNotFound},
		"root refused":    {&raydv1.PtyStart{User: &raydv1.User{Username: "root"}}, connect.CodePermissionDenied},
		"bad env name":    {&raydv1.PtyStart{Envs: map[string]string{"A=B": "x"}}, connect.CodeInvalidArgument},
		"timeout too big": {&raydv1.PtyStart{TimeoutMs: 1 << 62}, connect.CodeInvalidArgument},
	}
	for name, tc := range cases {
		if err := create(tc.req); code(err) != tc.want {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}

	m := shPty(t, ctx, c, &raydv1.PtySize{Cols: 4096, Rows: 1})
	if _, err := c.Resize(ctx, connect.NewRequest(&raydv1.ResizeRequest{Pid: m.pid, Size: &raydv1.PtySize{Cols: 4097, Rows: 10}})); code(err) != connect.CodeInvalidArgument {
		t.Fatalf("Resize to 4097 columns: %v", err)
	}
	m.send(c, "stty size\n")
	m.until(`1 4096\r\n`)
	// Zero fields mean 80x24, as in Create.
	if _, err := c.Resize(ctx, connect.NewRequest(&raydv1.ResizeRequest{Pid: m.pid})); err != nil {
		t.Fatal(err)
	}
	m.send(c, "stty size; exit\n")
	m.until(`24 80\r\n`)
	m.finish()

	// A ProcessService process is not a PTY.
	ps, err := h.processes().Start(ctx, connect.NewRequest(shell("sleep 30")))
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	if !ps.Receive() {
		t.Fatal(ps.Err())
	}
	pid := ps.Msg().GetStart().GetPid()
	defer h.processes().SendSignal(context.Background(), connect.NewRequest(&raydv1.SendSignalRequest{Pid: pid, Signal: raydv1.Signal_SIGNAL_SIGKILL}))
	if _, err := c.SendInput(ctx, connect.NewRequest(&raydv1.SendInputRequest{Pid: pid, Data: []byte("x")})); code(err) != connect.CodeFailedPrecondition {
		t.Fatalf("SendInput to a process: %v", err)
	}
	if _, err := c.Resize(ctx, connect.NewRequest(&raydv1.ResizeRequest{Pid: pid, Size: &raydv1.PtySize{Cols: 10, Rows: 10}})); code(err) != connect.CodeFailedPrecondition {
		t.Fatalf("Resize of a process: %v", err)
	}
	if _, err := c.Kill(ctx, connect.NewRequest(&raydv1.KillRequest{Pid: pid})); code(err) != connect.CodeFailedPrecondition {
		t.Fatalf("Kill of a process: %v", err)
	}
}

func TestPtyLoginShellAsUser(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("no /bin/bash")
	}
	h := newHarness(t)
	h.run(nil)
	c := h.ptys()
	ctx := testCtx(t)
	s, err := c.Create(ctx, connect.NewRequest(&raydv1.PtyStart{Shell: ptr("bash")}))
	if err != nil {
		t.Fatal(err)
	}
	m := newTerm(t, s)
	// A login shell (argv[0] "-bash") as uid 1000, on a terminal it owns.
	m.send(c, `echo "<$0:$(id -u):$TERM:$(stat -c %u "$(tty)")>"; exit`+"\n")
	m.until(`[\r\n]<-bash:1000:xterm-256color:1000>\r\n`)
	m.finish()
	if m.end.GetExitCode() != 0 {
		t.Fatalf("end %v", m.end)
	}
}

func TestPtyAuth(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(nil)
	ctx := testCtx(t)
	noToken := raydv1connect.NewPtyServiceClient(h.client, h.apiURL)
	s, err := noToken.Create(ctx, connect.NewRequest(&raydv1.PtyStart{}))
	if err == nil {
		for s.Receive() {
			t.Fatalf("message without token: %v", s.Msg())
		}
		err = s.Err()
	}
	if code(err) != connect.CodeUnauthenticated {
		t.Fatalf("Create without token: %v", err)
	}
	if _, err := noToken.SendInput(ctx, connect.NewRequest(&raydv1.SendInputRequest{Pid: 1, Data: []byte("x")})); code(err) != connect.CodeUnauthenticated {
		t.Fatalf("SendInput without token: %v", err)
	}
	if _, err := noToken.Kill(ctx, connect.NewRequest(&raydv1.KillRequest{Pid: 1})); code(err) != connect.CodeUnauthenticated {
		t.Fatalf("Kill without token: %v", err)
	}
	if got := h.health().GetFeatures().GetServices(); !strings.Contains(strings.Join(got, ","), "pty") {
		t.Fatalf("features.services %v", got)
	}
}
