package daemon

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/limits"
	"github.com/rayito-dev/rayito/proto/runpayload"
)

func TestStartStreamsEveryShapeOverEveryProtocol(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(nil)
	protocols := map[string][]connect.ClientOption{
		"connect":  nil,
		"grpc":     {connect.WithGRPC()},
		"grpc-web": {connect.WithGRPCWeb()},
	}
	for name, opts := range protocols {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := h.processes(opts...).Start(context.Background(), connect.NewRequest(shell("echo out; echo err >&2; exit 3")))
			if err != nil {
				t.Fatal(err)
			}
			r := collect(t, s)
			if r.pid == 0 || r.stdout != "out\n" || r.stderr != "err\n" {
				t.Fatalf("got %+v", r)
			}
			if r.end.GetExitCode() != 3 || !r.end.GetExited() || r.end.GetStatus() != "exited" {
				t.Fatalf("end %v", r.end)
			}
		})
	}
}

func TestStartRunsAsUser1000(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	h := newHarness(t)
	h.run(nil)
	s, err := h.processes().Start(context.Background(), connect.NewRequest(shell("id -u; id -g; echo $USER $LOGNAME; echo $(ulimit -Sn) $(ulimit -Hn); awk '/^Max (core file size|processes)/{print $(NF-2), $(NF-1)}' /proc/self/limits; echo hi")))
	if err != nil {
		t.Fatal(err)
	}
	r := collect(t, s)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 7 || lines[0] != "1000" || lines[1] != "1000" || lines[3] != "4096 4096" || lines[4] != "0 0" || !strings.HasPrefix(lines[5], "512 ") || lines[6] != "hi" {
		t.Fatalf("stdout %q", r.stdout)
	}
	if r.end.GetExitCode() != 0 {
		t.Fatalf("end %v", r.end)
	}
}

func TestEnvironmentIsBuiltFromScratch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(func(p *runpayload.Payload) { p.Envs = map[string]string{"A": "payload", "B": "payload"} })
	req := shell("env | sort")
	req.Process.Envs = map[string]string{"B": "request"}
	s, err := h.processes().Start(context.Background(), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	r := collect(t, s)
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		k, v, _ := strings.Cut(l, "=")
		env[k] = v
	}
	if env["A"] != "payload" || env["B"] != "request" || env["PATH"] == "" || env["HOME"] == "" || env["USER"] == "" || env["LOGNAME"] == "" {
		t.Fatalf("env %v", env)
	}
	for k := range env {
		switch k {
		case "A", "B", "PATH", "HOME", "USER", "LOGNAME", "PWD", "SHLVL", "_":
		default:
			t.Errorf("leaked variable %s", k)
		}
	}
}

func TestReattachWithFromSeq(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(nil)
	c := h.processes()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.Start(ctx, connect.NewRequest(shell("for i in 1 2 3 4 5 6; do echo $i; sleep 0.1; done")))
	if err != nil {
		t.Fatal(err)
	}
	var pid uint32
	var got strings.Builder
	var last uint64
	for s.Receive() {
		if st := s.Msg().GetStart(); st != nil {
			pid = st.GetPid()
		}
		if d := s.Msg().GetData(); d != nil {
			got.Write(d.GetStdout())
			last = d.GetSeq()
			break
		}
	}
	// Disconnect mid-stream; the process goes on.
	cancel()
	s.Close()
	r := collect(t, mustConnect(t, c, pid, last+1))
	got.WriteString(r.stdout)
	if got.String() != "1\n2\n3\n4\n5\n6\n" || r.end.GetExitCode() != 0 {
		t.Fatalf("reassembled %q, end %v", got.String(), r.end)
	}
	// After the end, Connect from 0 replays the whole output and the end.
	again := collect(t, mustConnect(t, c, pid, 0))
	if again.stdout != "1\n2\n3\n4\n5\n6\n" || again.end == nil {
		t.Fatalf("replay after end: %+v", again)
	}
	// A seq that was never produced is out of range.
	bad, err := c.Connect(context.Background(), connect.NewRequest(&raydv1.ConnectRequest{Pid: pid, FromSeq: 1000}))
	if err == nil {
		for bad.Receive() {
		}
		err = bad.Err()
	}
	if code(err) != connect.CodeOutOfRange {
		t.Fatalf("from_seq past the end: %v", err)
	}
	// An unknown pid is not found.
	nf, err := c.Connect(context.Background(), connect.NewRequest(&raydv1.ConnectRequest{Pid: 1 << 30}))
	if err == nil {
		for nf.Receive() {
		}
		err = nf.Err()
	}
	if code(err) != connect.CodeNotFound {
		t.Fatalf("unknown pid: %v", err)
	}
}

func mustConnect(t *testing.T, c interface {
	Connect(context.Context, *connect.Request[raydv1.ConnectRequest]) (*connect.ServerStreamForClient[raydv1.ProcessEvent], error)
}, pid uint32, from uint64) *connect.ServerStreamForClient[raydv1.ProcessEvent] {
	t.Helper()
	s, err := c.Connect(context.Background(), connect.NewRequest(&raydv1.ConnectRequest{Pid: pid, FromSeq: from}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCancelBeforeFirstMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(nil)
	c := h.processes()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s, err := c.Start(ctx, connect.NewRequest(shell("sleep 0.2"))); err == nil {
		for s.Receive() {
		}
		if code(s.Err()) != connect.CodeCanceled {
			t.Fatalf("err %v", s.Err())
		}
		s.Close()
	}
	// rayd stays healthy and serves the next call.
	r := collect(t, mustStart(t, c, shell("echo ok")))
	if r.stdout != "ok\n" {
		t.Fatalf("after cancel: %+v", r)
	}
}

func mustStart(t *testing.T, c interface {
	Start(context.Context, *connect.Request[raydv1.StartRequest]) (*connect.ServerStreamForClient[raydv1.ProcessEvent], error)
}, req *raydv1.StartRequest) *connect.ServerStreamForClient[raydv1.ProcessEvent] {
	t.Helper()
	// Bounded: a rayd that stopped under the test must not hang it. The
	// context bounds the whole stream: longer than any test follows one.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	s, err := c.Start(ctx, connect.NewRequest(req))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return s
}

func TestSlowReaderDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(nil)
	c := h.processes()
	// A subscriber that never reads: its HTTP/2 window fills and it falls
	// behind, but the process and the fast reader go on.
	req := shell("sleep 0.3; head -c 30000000 /dev/zero")
	fast := mustStart(t, c, req)
	if !fast.Receive() {
		t.Fatal(fast.Err())
	}
	pid := fast.Msg().GetStart().GetPid()
	slowCtx, slowCancel := context.WithCancel(context.Background())
	defer slowCancel()
	slow, err := c.Connect(slowCtx, connect.NewRequest(&raydv1.ConnectRequest{Pid: pid}))
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	total := 0
	var end *raydv1.EndEvent
	for fast.Receive() {
		total += len(fast.Msg().GetData().GetStdout())
		if e := fast.Msg().GetEnd(); e != nil {
			end = e
		}
	}
	if fast.Err() != nil || total != 30000000 || end.GetExitCode() != 0 {
		t.Fatalf("fast reader got %d bytes, end %v, err %v", total, end, fast.Err())
	}
	// The slow reader, when it finally reads, either got everything (the
	// transport buffered it) or learns that it was cut; never a silent gap.
	var slowEnd *raydv1.EndEvent
	slowTotal := 0
	for slow.Receive() {
		slowTotal += len(slow.Msg().GetData().GetStdout())
		if e := slow.Msg().GetEnd(); e != nil {
			slowEnd = e
		}
	}
	switch {
	case slowEnd.GetStatus() == "output_truncated" && slowTotal < 30000000:
	case slowEnd.GetStatus() == "exited" && slowTotal == 30000000:
	default:
		t.Fatalf("slow reader got %d bytes and end %v (err %v)", slowTotal, slowEnd, slow.Err())
	}
}

// TestLiveProcessCap is not parallel: it fills the shared supervisor.
func TestLiveProcessCap(t *testing.T) {
	h := newHarness(t)
	h.run(nil)
	c := h.processes()
	var wg sync.WaitGroup
	errs := make(chan error, limits.MaxLiveProcesses)
	for range limits.MaxLiveProcesses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// sleep itself, not sh -c: the cap test must not eat the uid's NPROC budget twice.
			s, err := c.Start(context.Background(), connect.NewRequest(&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "sleep", Args: []string{"60"}}}))
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			if !s.Receive() || s.Msg().GetStart() == nil {
				errs <- s.Err()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("start under the cap: %v", err)
	}
	s, err := c.Start(context.Background(), connect.NewRequest(shell("true")))
	if err == nil {
		for s.Receive() {
		}
		err = s.Err()
	}
	if code(err) != connect.CodeResourceExhausted {
		t.Fatalf("start over the cap: %v", err)
	}
	list, err := c.List(context.Background(), connect.NewRequest(&raydv1.ListRequest{}))
	if err != nil || len(list.Msg.GetProcesses()) != limits.MaxLiveProcesses {
		t.Fatalf("list: %v, %d", err, len(list.Msg.GetProcesses()))
	}
	// Killing one frees a slot.
	victim := list.Msg.GetProcesses()[0].GetPid()
	if _, err := c.SendSignal(context.Background(), connect.NewRequest(&raydv1.SendSignalRequest{Pid: victim, Signal: raydv1.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	r := collect(t, mustConnect(t, c, victim, 0))
	if r.end.GetExitCode() != 128+9 || r.end.GetStatus() != "signaled" {
		t.Fatalf("killed: %v", r.end)
	}
	if r := collect(t, mustStart(t, c, shell("echo freed"))); r.stdout != "freed\n" {
		t.Fatalf("after a slot freed: %+v", r)
	}
	for _, p := range list.Msg.GetProcesses() {
		_, _ = c.SendSignal(context.Background(), connect.NewRequest(&raydv1.SendSignalRequest{Pid: p.GetPid(), Signal: raydv1.Signal_SIGNAL_SIGKILL}))
	}
	for _, p := range list.Msg.GetProcesses()[1:] {
		collect(t, mustConnect(t, c, p.GetPid(), 0))
	}
}

func TestTimeoutEscalatesToKill(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(nil)
	req := shell(`trap "" TERM; echo ready; while :; do sleep 0.05; done`)
	req.TimeoutMs = 300
	start := time.Now()
	r := collect(t, mustStart(t, h.processes(), req))
	if r.end.GetStatus() != "timeout" || r.end.GetExited() || r.end.GetError() != "deadline_exceeded" || r.end.GetSignal() != 9 || r.end.GetExitCode() != 128+9 {
		t.Fatalf("end %v", r.end)
	}
	// SIGTERM was ignored, so the end came after the 5 s grace.
	if time.Since(start) < limits.TimeoutKillGrace {
		t.Fatalf("ended after %v: SIGKILL came before the grace", time.Since(start))
	}
}

func TestStdinSignalsAndList(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.run(nil)
	c := h.processes()
	ctx := context.Background()
	req := &raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "cat"}, Stdin: true, Tag: ptr("cat-1")}
	s := mustStart(t, c, req)
	if !s.Receive() {
		t.Fatal(s.Err())
	}
	pid := s.Msg().GetStart().GetPid()
	if _, err := c.SendInput(ctx, connect.NewRequest(&raydv1.SendInputRequest{Pid: pid, Data: []byte("hello\n")})); err != nil {
		t.Fatal(err)
	}
	list, err := c.List(ctx, connect.NewRequest(&raydv1.ListRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var mine *raydv1.ProcessInfo
	for _, p := range list.Msg.GetProcesses() {
		if p.GetPid() == pid {
			mine = p
		}
	}
	if mine.GetTag() != "cat-1" || mine.GetConfig().GetCmd() != "cat" || mine.GetKind() != raydv1.ProcessKind_PROCESS_KIND_PROCESS {
		t.Fatalf("list entry %v", mine)
	}
	if _, err := c.CloseStdin(ctx, connect.NewRequest(&raydv1.CloseStdinRequest{Pid: pid})); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for s.Receive() {
		out.Write(s.Msg().GetData().GetStdout())
	}
	if out.String() != "hello\n" {
		t.Fatalf("cat echoed %q", out.String())
	}

	// stdin is /dev/null unless asked: SendInput is refused.
	sleeper := mustStart(t, c, shell("read x; echo got=$x; sleep 30"))
	if !sleeper.Receive() {
		t.Fatal(sleeper.Err())
	}
	spid := sleeper.Msg().GetStart().GetPid()
	if _, err := c.SendInput(ctx, connect.NewRequest(&raydv1.SendInputRequest{Pid: spid, Data: []byte("x\n")})); code(err) != connect.CodeFailedPrecondition {
		t.Fatalf("SendInput without stdin: %v", err)
	}
	if _, err := c.SendSignal(ctx, connect.NewRequest(&raydv1.SendSignalRequest{Pid: spid, Signal: raydv1.Signal(77)})); code(err) != connect.CodeInvalidArgument {
		t.Fatalf("unknown signal: %v", err)
	}
	// read x gets EOF from /dev/null at once: wait for its echo, so the
	// SIGTERM lands on the sleep (before it, the shell could die first).
	var end *raydv1.EndEvent
	var got strings.Builder
	for got.String() != "got=\n" && sleeper.Receive() {
		got.Write(sleeper.Msg().GetData().GetStdout())
		if e := sleeper.Msg().GetEnd(); e != nil {
			t.Fatalf("ended before the signal: %v, stdout %q", e, got.String())
		}
	}
	if _, err := c.SendSignal(ctx, connect.NewRequest(&raydv1.SendSignalRequest{Pid: spid, Signal: raydv1.Signal_SIGNAL_SIGTERM})); err != nil {
		t.Fatal(err)
	}
	for sleeper.Receive() {
		got.Write(sleeper.Msg().GetData().GetStdout())
		if e := sleeper.Msg().GetEnd(); e != nil {
			end = e
		}
	}
	if got.String() != "got=\n" || end.GetExitCode() != 128+15 || end.GetStatus() != "signaled" {
		t.Fatalf("stdout %q end %v", got.String(), end)
	}
}

// TestBadRequests is not parallel: it checks the shared live count.
func TestBadRequests(t *testing.T) {
	h := newHarness(t)
	h.run(nil)
	c := h.processes()
	before := sharedSupervisor.Live()
	cases := map[string]struct {
		req  *raydv1.StartRequest
		want connect.Code
	}{
		"no process":      {&raydv1.StartRequest{}, connect.CodeInvalidArgument},
		"empty cmd":       {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{}}, connect.CodeInvalidArgument},
		"NUL in arg":      {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "echo", Args: []string{"a\x00b"}}}, connect.CodeInvalidArgument},
		"bad env name":    {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "true", Envs: map[string]string{"A=B": "x"}}}, connect.CodeInvalidArgument},
		"missing command": {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "no-such-command-xyz"}}, connect.CodeNotFound},
		"missing cwd":     {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "true", Cwd: ptr("/no/such/dir")}}, connect.CodeNotFound},
		"kill_tree":       {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "true"}, KillTree: true}, connect.CodeUnimplemented},
		"root refused":    {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "true"}, User: &raydv1.User{Username: "root"}}, connect.CodePermissionDenied},
		"system user":     {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "true"}, User: &raydv1.User{Username: "daemon"}}, connect.CodePermissionDenied},
		"unknown user":    {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "true"}, User: &raydv1.User{Username: "nosuchuser"}}, connect.CodePermissionDenied},
	}
	for name, tc := range cases {
		s, err := c.Start(context.Background(), connect.NewRequest(tc.req))
		if err == nil {
			for s.Receive() {
			}
			err = s.Err()
		}
		if code(err) != tc.want {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
	if n := sharedSupervisor.Live(); n != before {
		t.Fatalf("refused starts changed the live count from %d to %d", before, n)
	}
}

func ptr[T any](v T) *T { return &v }
