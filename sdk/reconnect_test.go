package rayito

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// suspendingErr is how rayd cuts a stream on /suspend.
func suspendingErr() error {
	return wireErr(connect.CodeUnavailable, raydv1.ErrorReason_ERROR_REASON_SUSPENDING, "the sandbox is being suspended")
}

// pauseScript makes fakeID SUSPENDING, then SUSPENDED, for the given
// numbers of GetMicrovm calls after a cut, then RUNNING; touched counts
// the calls to the sandbox's endpoint (Health, reattaches) made while it
// was not running.
type pauseScript struct {
	p                    *platform
	suspending, suspends int
	gets                 int
	touched              atomic.Int32
	armed                atomic.Bool
}

func (ps *pauseScript) install() {
	ps.p.onGet = func(vm *microvmsapi.Microvm) {
		if !ps.armed.Load() {
			return
		}
		ps.gets++
		switch {
		case ps.gets <= ps.suspending:
			vm.State = microvmsapi.StateSuspending
		case ps.gets <= ps.suspending+ps.suspends:
			vm.State = microvmsapi.StateSuspended
		default:
			vm.State = microvmsapi.StateRunning
			ps.armed.Store(false)
		}
	}
}

// endpoint records a call to the sandbox's endpoint.
func (ps *pauseScript) endpoint() {
	if ps.p.state() != microvmsapi.StateRunning {
		ps.touched.Add(1)
	}
}

// A suspend cuts a command's stream: the follower waits on the control
// plane only (no Health, no reattach) for longer than its whole reconnect
// budget, then reattaches once the sandbox runs again, losing and
// repeating nothing.
func TestFollowerWaitsOutAPause(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	ps := &pauseScript{p: p, suspending: 3, suspends: 200}
	ps.install()
	p.proc.start = func(s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(9))
		_ = s.Send(data(1, "a"))
		ps.armed.Store(true)
		return suspendingErr()
	}
	p.proc.connect = func(from uint64, s *connect.ServerStream[raydv1.ProcessEvent]) error {
		ps.endpoint()
		_ = s.Send(startEv(9))
		_ = s.Send(data(1, "a")) // replayed: dropped
		_ = s.Send(data(2, "b"))
		return s.Send(endEv(0))
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	healthsBefore := p.health.healths.Load()
	start := time.Now()
	res, err := sbx.Commands.Run(t.Context(), "x")
	if err != nil || res.Stdout != "ab" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if d := time.Since(start); d < fastTimings.reconnect {
		t.Logf("the pause lasted %s only (budget %s)", d, fastTimings.reconnect)
	}
	if n := ps.touched.Load(); n != 0 {
		t.Fatalf("%d calls reached the paused sandbox's endpoint", n)
	}
	p.vmMu.Lock()
	gets := ps.gets
	p.vmMu.Unlock()
	if gets < ps.suspending+ps.suspends {
		t.Fatalf("only %d GetMicrovm calls", gets)
	}
	if p.health.healths.Load() == healthsBefore {
		t.Fatal("no Health before the reattach")
	}
	p.proc.mu.Lock()
	defer p.proc.mu.Unlock()
	if len(p.proc.connects) != 1 || p.proc.connects[0] != 2 {
		t.Fatalf("reattached from %v, want [2]", p.proc.connects)
	}
}

// After a stream cut by a suspend, a control plane that still says
// RUNNING is not believed at once: the endpoint is left alone for the
// suspend grace, unless a paused state shows up first.
func TestFollowerDistrustsAStaleRunningAfterASuspend(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	var cutAt atomic.Int64
	p.proc.start = func(s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(9))
		cutAt.Store(time.Now().UnixNano())
		return suspendingErr()
	}
	var reattachedAfter atomic.Int64
	p.proc.connect = func(from uint64, s *connect.ServerStream[raydv1.ProcessEvent]) error {
		reattachedAfter.CompareAndSwap(0, time.Now().UnixNano()-cutAt.Load())
		_ = s.Send(startEv(9))
		return s.Send(endEv(0))
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sbx.Commands.Run(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	if d := time.Duration(reattachedAfter.Load()); d < fastTimings.suspendGrace {
		t.Fatalf("reattached %s after the cut, within the suspend grace %s", d, fastTimings.suspendGrace)
	}
}

// A sandbox that ended under a command: the handle says so, with the
// reason, after one look at the control plane.
func TestFollowerReportsTheSandboxsEnd(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	ended := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	p.proc.start = func(s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(9))
		p.setVM(func(vm *microvmsapi.Microvm) {
			vm.State, vm.StateReason, vm.TerminatedAt = microvmsapi.StateTerminated, "Container Stopped with Exit Code: 124", &ended
		})
		return connect.NewError(connect.CodeUnavailable, errors.New("connection reset"))
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sbx.Commands.Run(t.Context(), "x")
	var ee *SandboxEndedError
	if !errors.As(err, &ee) || ee.Reason != EndTimeout || !ee.EndedAt.Equal(ended) || !errors.Is(err, ErrSandboxTimeout) || !errors.Is(err, ErrSandboxEnded) {
		t.Fatalf("Run = %v, want the sandbox's end (timeout)", err)
	}
	if want := "sandbox " + fakeID + " ended at 2026-05-06T07:08:09Z (timeout)"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	p.proc.mu.Lock()
	n := len(p.proc.connects)
	p.proc.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d reattaches to an ended sandbox", n)
	}

	// A sandbox the platform no longer knows has ended too, and a refusal
	// (here: the process is gone) is checked against the control plane
	// once.
	p2 := newPlatform(t)
	p2.proc.start = func(s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(9))
		p2.setVM(func(vm *microvmsapi.Microvm) {
			vm.State = microvmsapi.StateTerminating
			vm.StateReason = "init_exited: killed by signal 9 (killed)"
		})
		return wireErr(connect.CodeNotFound, raydv1.ErrorReason_ERROR_REASON_NOT_FOUND, "no such process")
	}
	sbx2, err := Connect(t.Context(), fakeID, p2.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sbx2.Commands.Run(t.Context(), "x")
	if !errors.As(err, &ee) || ee.Reason != EndInitExited || ee.Detail != "killed by signal 9 (killed)" {
		t.Fatalf("Run = %v, want init_exited", err)
	}
}

// The status "suspending" on an end event (rather than the UNAVAILABLE
// error) is a cut too, not the command's end.
func TestFollowerTreatsASuspendingEndAsACut(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.proc.start = func(s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(9))
		_ = s.Send(data(1, "a"))
		return s.Send(&raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_End{End: &raydv1.EndEvent{Status: "suspending"}}})
	}
	p.proc.connect = func(from uint64, s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(9))
		_ = s.Send(data(2, "b"))
		return s.Send(endEv(0))
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sbx.Commands.Run(t.Context(), "x")
	if err != nil || res.Stdout != "ab" || res.Status != StatusExited {
		t.Fatalf("Run = %+v, %v", res, err)
	}
}

// New end statuses surface on the result and its error.
func TestCommandEndStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status string
		code   int32
		msg    string
		isTO   bool
	}{
		{"oom_killed", 137, "rayito: command killed by the OOM killer (exit code 137)", false},
		{"sandbox_timeout", 143, "rayito: command ended by the sandbox's timeout", true},
		{"signaled", 130, "rayito: command ended (signaled) with exit code 130", false},
	} {
		p := newPlatform(t)
		p.proc.start = func(s *connect.ServerStream[raydv1.ProcessEvent]) error {
			_ = s.Send(startEv(9))
			return s.Send(&raydv1.ProcessEvent{Event: &raydv1.ProcessEvent_End{End: &raydv1.EndEvent{ExitCode: tc.code, Status: tc.status}}})
		}
		sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sbx.Commands.Run(t.Context(), "x")
		var ce *CommandExitError
		if !errors.As(err, &ce) || res.Status != CommandStatus(tc.status) || err.Error() != tc.msg || errors.Is(err, ErrSandboxTimeout) != tc.isTO {
			t.Errorf("%s: Run = %+v, %v", tc.status, res, err)
		}
	}
}

func ptyData(seq uint64, b string) *raydv1.PtyServerMessage {
	return &raydv1.PtyServerMessage{Seq: seq, Event: &raydv1.PtyServerMessage_Data{Data: []byte(b)}}
}

func ptyStarted(pid uint32) *raydv1.PtyServerMessage {
	return &raydv1.PtyServerMessage{Event: &raydv1.PtyServerMessage_Started{Started: &raydv1.StartEvent{Pid: pid}}}
}

// The terminal's follower is the same one: a pause and a resume lose and
// repeat nothing.
func TestPtyReattachesAfterAPause(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	ps := &pauseScript{p: p, suspending: 1, suspends: 20}
	ps.install()
	p.pty.create = func(s *connect.ServerStream[raydv1.PtyServerMessage]) error {
		_ = s.Send(ptyStarted(5))
		_ = s.Send(ptyData(1, "$ "))
		ps.armed.Store(true)
		return suspendingErr()
	}
	p.pty.connect = func(from uint64, s *connect.ServerStream[raydv1.PtyServerMessage]) error {
		ps.endpoint()
		_ = s.Send(ptyStarted(5))
		_ = s.Send(ptyData(1, "$ "))
		_ = s.Send(ptyData(2, "exit\r\n"))
		return s.Send(&raydv1.PtyServerMessage{Event: &raydv1.PtyServerMessage_Exited{Exited: &raydv1.EndEvent{ExitCode: 3, Exited: true, Status: "exited"}}})
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out strings.Builder
	h, err := sbx.Pty.Create(t.Context(), OnData(func(b []byte) { mu.Lock(); out.Write(b); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	code, err := h.Wait(t.Context())
	mu.Lock()
	defer mu.Unlock()
	if err != nil || code != 3 || out.String() != "$ exit\r\n" {
		t.Fatalf("Wait = %d, %v; output %q", code, err, out.String())
	}
	if ps.touched.Load() != 0 {
		t.Fatal("the paused sandbox's endpoint was reached")
	}
}

func watchEvent(name string) *raydv1.WatchDirResponse {
	return &raydv1.WatchDirResponse{Event: &raydv1.WatchDirResponse_Filesystem{Filesystem: &raydv1.FilesystemEvent{
		Name: name, Type: raydv1.FilesystemEventType_FILESYSTEM_EVENT_TYPE_CREATE}}}
}

var watchStarted = &raydv1.WatchDirResponse{Event: &raydv1.WatchDirResponse_Started{Started: &raydv1.WatchStarted{}}}

// A watch cut by a pause is armed again once the sandbox runs, and says
// that changes may have been missed.
func TestWatchResyncsAfterAPause(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	ps := &pauseScript{p: p, suspending: 1, suspends: 20}
	ps.install()
	release := make(chan struct{})
	p.fs.watch = func(ctx context.Context, n int, s *connect.ServerStream[raydv1.WatchDirResponse]) error {
		_ = s.Send(watchStarted)
		switch n {
		case 1:
			_ = s.Send(watchEvent("a"))
			<-release
			ps.armed.Store(true)
			return suspendingErr()
		case 2:
			ps.endpoint()
			_ = s.Send(watchEvent("b"))
			<-ctx.Done()
			return nil
		}
		return errors.New("too many watches")
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sbx.Files.Watch(t.Context(), "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := w.Next(); err != nil || ev.Name != "a" || ev.Op != "create" || ev.Resynced {
		t.Fatalf("first Next = %+v, %v", ev, err)
	}
	close(release)
	if ev, err := w.Next(); err != nil || !ev.Resynced || ev.Name != "" || ev.Op != "" {
		t.Fatalf("second Next = %+v, %v, want a Resynced mark", ev, err)
	}
	if ev, err := w.Next(); err != nil || ev.Name != "b" {
		t.Fatalf("third Next = %+v, %v", ev, err)
	}
	if ps.touched.Load() != 0 {
		t.Fatal("the paused sandbox's endpoint was reached")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("Next after Close = %v, want io.EOF", err)
	}
}

// A watch whose sandbox ended says so; Close while it waits for a paused
// sandbox ends the wait.
func TestWatchEndsWithTheSandbox(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.fs.watch = func(ctx context.Context, n int, s *connect.ServerStream[raydv1.WatchDirResponse]) error {
		_ = s.Send(watchStarted)
		p.setVM(func(vm *microvmsapi.Microvm) {
			vm.State, vm.StateReason = microvmsapi.StateTerminated, "killed_by_user"
		})
		return connect.NewError(connect.CodeUnavailable, errors.New("reset"))
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sbx.Files.Watch(t.Context(), "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	var ee *SandboxEndedError
	if _, err := w.Next(); !errors.As(err, &ee) || ee.Reason != EndKilledByUser {
		t.Fatalf("Next = %v", err)
	}
	if _, err := w.Next(); !errors.As(err, &ee) {
		t.Fatalf("Next again = %v, want the same end", err)
	}
	_ = w.Close()

	paused := newPlatform(t)
	paused.fs.watch = func(ctx context.Context, n int, s *connect.ServerStream[raydv1.WatchDirResponse]) error {
		_ = s.Send(watchStarted)
		paused.setVM(func(vm *microvmsapi.Microvm) { vm.State = microvmsapi.StateSuspended })
		return suspendingErr()
	}
	sbx, err = Connect(t.Context(), fakeID, paused.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	w, err = sbx.Files.Watch(t.Context(), "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := w.Next(); done <- err }()
	time.Sleep(20 * time.Millisecond)
	_ = w.Close()
	select {
	case err := <-done:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("Next after Close = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the wait")
	}
	if n := paused.fs.calls.Load(); n != 1 {
		t.Fatalf("%d watches: the paused sandbox was reached", n)
	}
}

// A handle's wait for a paused sandbox ends with its context.
func TestFollowerWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	p := newPlatform(t)
	p.proc.start = func(s *connect.ServerStream[raydv1.ProcessEvent]) error {
		_ = s.Send(startEv(9))
		p.setVM(func(vm *microvmsapi.Microvm) { vm.State = microvmsapi.StateSuspended })
		return suspendingErr()
	}
	sbx, err := Connect(t.Context(), fakeID, p.opts(t, WithAccessToken(testToken(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, err := sbx.Commands.Run(ctx, "x"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v", err)
	}
}
