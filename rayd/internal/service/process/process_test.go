package process_test

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
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

func TestStartStreamsEveryShapeOverEveryProtocol(t *testing.T) {
	t.Parallel()
	h := daemontest.New(t)
	h.Run(nil)
	protocols := map[string][]connect.ClientOption{
		"connect":  nil,
		"grpc":     {connect.WithGRPC()},
		"grpc-web": {connect.WithGRPCWeb()},
	}
	for name, opts := range protocols {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := h.Processes(opts...).Start(context.Background(), connect.NewRequest(raydtest.Shell("echo out; echo err >&2; exit 3")))
			if err != nil {
				t.Fatal(err)
			}
			r := raydtest.Collect(t, s)
			if r.Pid == 0 || r.Stdout != "out\n" || r.Stderr != "err\n" {
				t.Fatalf("got %+v", r)
			}
			if r.End.GetExitCode() != 3 || !r.End.GetExited() || r.End.GetStatus() != "exited" {
				t.Fatalf("end %v", r.End)
			}
		})
	}
}

func TestStartRunsAsUser1000(t *testing.T) {
	t.Parallel()
	raydtest.RequireRoot(t)
	h := daemontest.New(t)
	h.Run(nil)
	s, err := h.Processes().Start(context.Background(), connect.NewRequest(raydtest.Shell("id -u; id -g; echo $USER $LOGNAME; echo $(ulimit -Sn) $(ulimit -Hn); awk '/^Max (core file size|processes)/{print $(NF-2), $(NF-1)}' /proc/self/limits; echo hi")))
	if err != nil {
		t.Fatal(err)
	}
	r := raydtest.Collect(t, s)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 7 || lines[0] != "1000" || lines[1] != "1000" || lines[3] != "4096 4096" || lines[4] != "0 0" || !strings.HasPrefix(lines[5], "512 ") || lines[6] != "hi" {
		t.Fatalf("stdout %q", r.Stdout)
	}
	if r.End.GetExitCode() != 0 {
		t.Fatalf("end %v", r.End)
	}
}

func TestEnvironmentIsBuiltFromScratch(t *testing.T) {
	t.Parallel()
	h := daemontest.New(t)
	h.Run(func(p *runpayload.Payload) { p.Envs = map[string]string{"A": "payload", "B": "payload"} })
	req := raydtest.Shell("env | sort")
	req.Process.Envs = map[string]string{"B": "request"}
	s, err := h.Processes().Start(context.Background(), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	r := raydtest.Collect(t, s)
	env := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
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
	h := daemontest.New(t)
	h.Run(nil)
	c := h.Processes()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.Start(ctx, connect.NewRequest(raydtest.Shell("for i in 1 2 3 4 5 6; do echo $i; sleep 0.1; done")))
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
	r := raydtest.Collect(t, raydtest.MustConnect(t, c, pid, last+1))
	got.WriteString(r.Stdout)
	if got.String() != "1\n2\n3\n4\n5\n6\n" || r.End.GetExitCode() != 0 {
		t.Fatalf("reassembled %q, end %v", got.String(), r.End)
	}
	// After the end, Connect from 0 replays the whole output and the end.
	again := raydtest.Collect(t, raydtest.MustConnect(t, c, pid, 0))
	if again.Stdout != "1\n2\n3\n4\n5\n6\n" || again.End == nil {
		t.Fatalf("replay after end: %+v", again)
	}
	// A seq that was never produced is out of range.
	bad, err := c.Connect(context.Background(), connect.NewRequest(&raydv1.ConnectRequest{Pid: pid, FromSeq: 1000}))
	if err == nil {
		for bad.Receive() {
		}
		err = bad.Err()
	}
	if raydtest.CodeOf(err) != connect.CodeOutOfRange {
		t.Fatalf("from_seq past the end: %v", err)
	}
	// An unknown pid is not found.
	nf, err := c.Connect(context.Background(), connect.NewRequest(&raydv1.ConnectRequest{Pid: 1 << 30}))
	if err == nil {
		for nf.Receive() {
		}
		err = nf.Err()
	}
	if raydtest.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("unknown pid: %v", err)
	}
}

func TestCancelBeforeFirstMessage(t *testing.T) {
	t.Parallel()
	h := daemontest.New(t)
	h.Run(nil)
	c := h.Processes()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s, err := c.Start(ctx, connect.NewRequest(raydtest.Shell("sleep 0.2"))); err == nil {
		for s.Receive() {
		}
		if raydtest.CodeOf(s.Err()) != connect.CodeCanceled {
			t.Fatalf("err %v", s.Err())
		}
		s.Close()
	}
	// rayd stays healthy and serves the next call.
	r := raydtest.Collect(t, raydtest.MustStart(t, c, raydtest.Shell("echo ok")))
	if r.Stdout != "ok\n" {
		t.Fatalf("after cancel: %+v", r)
	}
}

func TestSlowReaderDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	h := daemontest.New(t)
	h.Run(nil)
	c := h.Processes()
	// A subscriber that never reads: its HTTP/2 window fills and it falls
	// behind, but the process and the fast reader go on.
	req := raydtest.Shell("sleep 0.3; head -c 30000000 /dev/zero")
	fast := raydtest.MustStart(t, c, req)
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
	h := daemontest.New(t)
	h.Run(nil)
	c := h.Processes()
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
	s, err := c.Start(context.Background(), connect.NewRequest(raydtest.Shell("true")))
	if err == nil {
		for s.Receive() {
		}
		err = s.Err()
	}
	if raydtest.CodeOf(err) != connect.CodeResourceExhausted {
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
	r := raydtest.Collect(t, raydtest.MustConnect(t, c, victim, 0))
	if r.End.GetExitCode() != 128+9 || r.End.GetStatus() != "signaled" {
		t.Fatalf("killed: %v", r.End)
	}
	if r := raydtest.Collect(t, raydtest.MustStart(t, c, raydtest.Shell("echo freed"))); r.Stdout != "freed\n" {
		t.Fatalf("after a slot freed: %+v", r)
	}
	for _, p := range list.Msg.GetProcesses() {
		_, _ = c.SendSignal(context.Background(), connect.NewRequest(&raydv1.SendSignalRequest{Pid: p.GetPid(), Signal: raydv1.Signal_SIGNAL_SIGKILL}))
	}
	for _, p := range list.Msg.GetProcesses()[1:] {
		raydtest.Collect(t, raydtest.MustConnect(t, c, p.GetPid(), 0))
	}
}

func TestTimeoutEscalatesToKill(t *testing.T) {
	t.Parallel()
	h := daemontest.New(t)
	h.Run(nil)
	req := raydtest.Shell(`trap "" TERM; echo ready; while :; do sleep 0.05; done`)
	req.TimeoutMs = 300
	start := time.Now()
	r := raydtest.Collect(t, raydtest.MustStart(t, h.Processes(), req))
	if r.End.GetStatus() != "timeout" || r.End.GetExited() || r.End.GetError() != "deadline_exceeded" || r.End.GetSignal() != 9 || r.End.GetExitCode() != 128+9 {
		t.Fatalf("end %v", r.End)
	}
	// SIGTERM was ignored, so the end came after the 5 s grace.
	if time.Since(start) < limits.TimeoutKillGrace {
		t.Fatalf("ended after %v: SIGKILL came before the grace", time.Since(start))
	}
}

func TestStdinSignalsAndList(t *testing.T) {
	t.Parallel()
	h := daemontest.New(t)
	h.Run(nil)
	c := h.Processes()
	ctx := context.Background()
	req := &raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "cat"}, Stdin: true, Tag: raydtest.Ptr("cat-1")}
	s := raydtest.MustStart(t, c, req)
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
	sleeper := raydtest.MustStart(t, c, raydtest.Shell("read x; echo got=$x; sleep 30"))
	if !sleeper.Receive() {
		t.Fatal(sleeper.Err())
	}
	spid := sleeper.Msg().GetStart().GetPid()
	if _, err := c.SendInput(ctx, connect.NewRequest(&raydv1.SendInputRequest{Pid: spid, Data: []byte("x\n")})); raydtest.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("SendInput without stdin: %v", err)
	}
	if _, err := c.SendSignal(ctx, connect.NewRequest(&raydv1.SendSignalRequest{Pid: spid, Signal: raydv1.Signal(77)})); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
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
	h := daemontest.New(t)
	h.Run(nil)
	c := h.Processes()
	before := raydtest.Supervisor().Live()
	cases := map[string]struct {
		req  *raydv1.StartRequest
		want connect.Code
	}{
		"no process":      {&raydv1.StartRequest{}, connect.CodeInvalidArgument},
		"empty cmd":       {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{}}, connect.CodeInvalidArgument},
		"NUL in arg":      {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "echo", Args: []string{"a\x00b"}}}, connect.CodeInvalidArgument},
		"bad env name":    {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "true", Envs: map[string]string{"A=B": "x"}}}, connect.CodeInvalidArgument},
		"missing command": {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "no-such-command-xyz"}}, connect.CodeNotFound},
		"missing cwd":     {&raydv1.StartRequest{Process: &raydv1.ProcessConfig{Cmd: "true", Cwd: raydtest.Ptr("/no/such/dir")}}, connect.CodeNotFound},
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
		if raydtest.CodeOf(err) != tc.want {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
	if n := raydtest.Supervisor().Live(); n != before {
		t.Fatalf("refused starts changed the live count from %d to %d", before, n)
	}
}
