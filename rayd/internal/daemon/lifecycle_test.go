package daemon

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

func (h *harness) lifecycle() raydv1connect.LifecycleServiceClient {
	return raydv1connect.NewLifecycleServiceClient(h.Client, h.APIURL, raydtest.WithToken(h.Token))
}

func (h *harness) setTimeout(ms uint64, mode raydv1.TimeoutMode) (*raydv1.LifecycleState, error) {
	resp, err := h.lifecycle().SetTimeout(context.Background(), connect.NewRequest(&raydv1.SetTimeoutRequest{TimeoutMs: ms, Mode: mode}))
	if err != nil {
		return nil, err
	}
	return resp.Msg.GetState(), nil
}

func withLifecycle(timeoutS, capS int, onTimeout string) func(*runpayload.Payload) {
	return func(p *runpayload.Payload) {
		p.Lifecycle = &runpayload.Lifecycle{TimeoutS: timeoutS, CapS: capS, OnTimeout: onTimeout, AutoResume: onTimeout == runpayload.OnTimeoutPause}
	}
}

func isSandboxTimeout(err error) bool {
	return raydtest.CodeOf(err) == connect.CodeFailedPrecondition && raydtest.ReasonOf(err) == raydv1.ErrorReason_ERROR_REASON_SANDBOX_TIMEOUT
}

const (
	exact   = raydv1.TimeoutMode_TIMEOUT_MODE_EXACT
	atLeast = raydv1.TimeoutMode_TIMEOUT_MODE_AT_LEAST
)

// within reports whether a unix-ms instant is d from now, give or take 2 s.
func within(ms int64, d time.Duration) bool {
	want := time.Now().Add(d).UnixMilli()
	return ms > want-2000 && ms < want+2000
}

func TestSetTimeoutUnmanaged(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Run(nil)
	if st := h.Health().GetLifecycle(); st.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_UNMANAGED || st.GetDeadlineUnixMs() != 0 {
		t.Fatalf("lifecycle %v", st)
	}
	_, err := h.setTimeout(60_000, exact)
	if raydtest.CodeOf(err) != connect.CodeFailedPrecondition || raydtest.ReasonOf(err) != raydv1.ErrorReason_ERROR_REASON_LIFECYCLE_UNMANAGED {
		t.Fatalf("SetTimeout unmanaged: %v", err)
	}
	// Bad arguments are refused first.
	if _, err := h.setTimeout(0, exact); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("0 ms: %v", err)
	}
	// The token is needed.
	anon := raydv1connect.NewLifecycleServiceClient(h.Client, h.APIURL)
	if _, err := anon.SetTimeout(context.Background(), connect.NewRequest(&raydv1.SetTimeoutRequest{TimeoutMs: 1000, Mode: exact})); raydtest.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("without a token: %v", err)
	}
	if f := h.Health().GetFeatures().GetServices(); !contains(f, "lifecycle") {
		t.Fatalf("features.services %v", f)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func TestSetTimeout(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Run(withLifecycle(600, 1200, runpayload.OnTimeoutPause))
	st := h.Health().GetLifecycle()
	if st.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_ACTIVE || st.GetTimeoutMs() != 600_000 || !within(st.GetDeadlineUnixMs(), 600*time.Second) ||
		!within(st.GetCapUnixMs(), 1200*time.Second) || st.GetOnTimeout() != raydv1.TimeoutAction_TIMEOUT_ACTION_PAUSE || !st.GetAutoResume() || st.GetExtensions() != 0 {
		t.Fatalf("after /run: %v", st)
	}
	for name, c := range map[string]struct {
		ms   uint64
		mode raydv1.TimeoutMode
	}{"0 ms": {0, exact}, "0 ms at least": {0, atLeast}, "unspecified": {1000, raydv1.TimeoutMode_TIMEOUT_MODE_UNSPECIFIED}, "unknown mode": {1000, 9}} {
		if _, err := h.setTimeout(c.ms, c.mode); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: %v", name, err)
		}
	}
	// EXACT may shorten.
	st, err := h.setTimeout(100_000, exact)
	if err != nil || !within(st.GetDeadlineUnixMs(), 100*time.Second) || st.GetTimeoutMs() != 100_000 || st.GetExtensions() != 0 {
		t.Fatalf("EXACT 100 s: %v %v", st, err)
	}
	// AT_LEAST only extends.
	st, err = h.setTimeout(50_000, atLeast)
	if err != nil || !within(st.GetDeadlineUnixMs(), 100*time.Second) || st.GetExtensions() != 0 {
		t.Fatalf("AT_LEAST 50 s: %v %v", st, err)
	}
	st, err = h.setTimeout(300_000, atLeast)
	if err != nil || !within(st.GetDeadlineUnixMs(), 300*time.Second) || st.GetExtensions() != 1 || st.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_ACTIVE {
		t.Fatalf("AT_LEAST 300 s: %v %v", st, err)
	}
	capMs := st.GetCapUnixMs()
	// Never past the cap; the message names it.
	for _, mode := range []raydv1.TimeoutMode{exact, atLeast} {
		_, err = h.setTimeout(1300_000, mode)
		if raydtest.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("past the cap (%v): %v", mode, err)
		}
		m := regexp.MustCompile(`cap_unix_ms=(\d+)`).FindStringSubmatch(err.Error())
		if m == nil {
			t.Fatalf("message %q has no cap_unix_ms", err)
		}
		if n, _ := strconv.ParseInt(m[1], 10, 64); n < capMs-2000 || n > capMs+2000 {
			t.Fatalf("cap_unix_ms=%d, state says %d", n, capMs)
		}
	}
	if _, err := h.setTimeout(1<<63, exact); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("huge timeout: %v", err)
	}
	if got := h.Health().GetLifecycle(); got.GetExtensions() != 1 || !within(got.GetDeadlineUnixMs(), 300*time.Second) {
		t.Fatalf("health lifecycle %v", got)
	}

	// Suspended time is not running time: the deadline moves later by it.
	before := h.Health().GetLifecycle()
	h.Hook("suspend", nil)
	time.Sleep(1500 * time.Millisecond)
	h.Hook("resume", nil)
	after := h.Health().GetLifecycle()
	if moved := after.GetDeadlineUnixMs() - before.GetDeadlineUnixMs(); moved < 1200 || moved > 4000 {
		t.Fatalf("the deadline moved by %d ms across a 1.5 s suspend", moved)
	}
	if moved := after.GetCapUnixMs() - before.GetCapUnixMs(); moved < 1200 {
		t.Fatalf("the cap moved by %d ms across a 1.5 s suspend", moved)
	}
}

// On timeout with kill, every process and PTY ends with sandbox_timeout and
// rayd stops, saying why (Run returns ErrSandboxTimeout: exit 124). Not
// parallel: the shared supervisor's processes all end.
func TestDeadlineKill(t *testing.T) {
	h := newHarness(t)
	// 3 s: the process and the PTY must be running before the deadline,
	// also on a loaded machine.
	h.Run(withLifecycle(3, 120, runpayload.OnTimeoutKill))
	ctx := raydtest.TestCtx(t)
	s := raydtest.MustStart(t, h.Processes(), raydtest.Shell("echo started; exec sleep 60"))
	pty := raydtest.ShPty(t, ctx, h.Ptys(), nil)
	start := time.Now()
	r := raydtest.Collect(t, s)
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("ended after %v", el)
	}
	if r.Stdout != "started\n" || r.End.GetStatus() != "sandbox_timeout" || r.End.GetError() != "sandbox_timeout" || r.End.GetExited() {
		t.Fatalf("process end %+v, %v", r, r.End)
	}
	pty.Finish()
	if pty.End.GetStatus() != "sandbox_timeout" {
		t.Fatalf("PTY end %v", pty.End)
	}
	deadline := time.Now().Add(15 * time.Second)
	for !errors.Is(h.d.StopReason(), ErrSandboxTimeout) {
		if time.Now().After(deadline) {
			t.Fatal("rayd did not stop after the timeout")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !h.Served(15 * time.Second) {
		t.Fatal("Serve did not return")
	}
	if code := exitCode(ErrSandboxTimeout); code != ExitSandboxTimeout || ExitSandboxTimeout != 124 {
		t.Fatalf("exit code %d", code)
	}
}

// On timeout with pause, rayd asks the platform to suspend it through the
// lifecycle descriptor and holds the API; after a resume a grace follows,
// then the action again unless SetTimeout extended it.
func TestDeadlinePause(t *testing.T) {
	t.Parallel()
	h := newHarnessWith(t, func(c *Config) { c.knobs = &knobs{grace: 700 * time.Millisecond} })
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	h.d.setLifecycleOut(pw)
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	wantLine := func(what string) {
		t.Helper()
		select {
		case l := <-lines:
			if l != "suspend" {
				t.Fatalf("%s: lifecycle line %q", what, l)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no suspend request", what)
		}
	}
	// Without auto_resume: a resume gives a grace (with it, a new
	// deadline: deadline's tests).
	h.Run(func(p *runpayload.Payload) {
		p.Lifecycle = &runpayload.Lifecycle{TimeoutS: 1, CapS: 120, OnTimeout: runpayload.OnTimeoutPause}
	})
	ctx := raydtest.TestCtx(t)
	s := raydtest.MustStart(t, h.Processes(), raydtest.Shell("echo up; exec sleep 60"))
	defer s.Close()
	if !s.Receive() || s.Msg().GetStart() == nil {
		t.Fatalf("no start event: %v", s.Err())
	}
	pid := s.Msg().GetStart().GetPid()
	wantLine("at the deadline")

	// Expired: only Health and SetTimeout answer; processes live on.
	if st := h.Health().GetLifecycle(); st.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_EXPIRED {
		t.Fatalf("lifecycle %v", st)
	}
	expectHeld(t, h, ctx)

	// The platform suspends and resumes it: a grace, still held.
	h.Hook("suspend", nil)
	h.Hook("resume", nil)
	if st := h.Health().GetLifecycle(); st.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_RESUME_GRACE {
		t.Fatalf("after resume: %v", st)
	}
	expectHeld(t, h, ctx)
	// No extension: the action again.
	wantLine("after the grace")
	if st := h.Health().GetLifecycle(); st.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_EXPIRED {
		t.Fatalf("after the grace: %v", st)
	}
	// This time SetTimeout extends it: active again.
	h.Hook("suspend", nil)
	h.Hook("resume", nil)
	st, err := h.setTimeout(60_000, atLeast)
	if err != nil || st.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_ACTIVE || st.GetExtensions() != 1 {
		t.Fatalf("SetTimeout in the grace: %v %v", st, err)
	}
	list, err := h.Processes().List(ctx, connect.NewRequest(&raydv1.ListRequest{}))
	if err != nil {
		t.Fatalf("List after the extension: %v", err)
	}
	// The process started before the expiry never stopped. Only it is
	// killed: the list also holds the processes of the parallel tests,
	// which share the supervisor.
	if !slices.ContainsFunc(list.Msg.GetProcesses(), func(p *raydv1.ProcessInfo) bool { return p.GetPid() == pid }) {
		t.Fatalf("process %d is not listed after the extension", pid)
	}
	if _, err := h.Processes().SendSignal(ctx, connect.NewRequest(&raydv1.SendSignalRequest{Pid: pid, Signal: raydv1.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	select {
	case l, ok := <-lines:
		if ok {
			t.Fatalf("unexpected lifecycle line %q", l)
		}
	default:
	}
}

// expectHeld checks the EXPIRED/RESUME_GRACE gate: every RPC but Health
// and SetTimeout answers FailedPrecondition SANDBOX_TIMEOUT.
func expectHeld(t *testing.T, h *harness, ctx context.Context) {
	t.Helper()
	if _, err := h.Processes().List(ctx, connect.NewRequest(&raydv1.ListRequest{})); !isSandboxTimeout(err) {
		t.Fatalf("List: %v", err)
	}
	s, err := h.Processes().Start(ctx, connect.NewRequest(raydtest.Shell("true")))
	if err == nil {
		for s.Receive() {
		}
		err = s.Err()
		s.Close()
	}
	if !isSandboxTimeout(err) {
		t.Fatalf("Start: %v", err)
	}
	healthC := raydv1connect.NewHealthServiceClient(h.Client, h.APIURL, raydtest.WithToken(h.Token))
	if _, err := healthC.HookAudit(ctx, connect.NewRequest(&raydv1.HookAuditRequest{})); !isSandboxTimeout(err) {
		t.Fatalf("HookAudit: %v", err)
	}
	if _, err := healthC.Metrics(ctx, connect.NewRequest(&raydv1.MetricsRequest{})); !isSandboxTimeout(err) {
		t.Fatalf("Metrics: %v", err)
	}
	codeC := raydv1connect.NewCodeServiceClient(h.Client, h.APIURL, raydtest.WithToken(h.Token))
	if _, err := codeC.ListContexts(ctx, connect.NewRequest(&raydv1.ListContextsRequest{})); !isSandboxTimeout(err) {
		t.Fatalf("an unimplemented service: %v", err)
	}
	if _, err := healthC.Health(ctx, connect.NewRequest(&raydv1.HealthRequest{})); err != nil {
		t.Fatalf("Health: %v", err)
	}
	// SetTimeout answers (an invalid one says so rather than being held).
	if _, err := h.setTimeout(0, exact); raydtest.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("SetTimeout: %v", err)
	}
}

// Without a lifecycle descriptor nobody can suspend the sandbox: it stays
// expired (and says so in the log).
func TestDeadlinePauseWithoutDescriptor(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.Run(withLifecycle(1, 120, runpayload.OnTimeoutPause))
	deadline := time.Now().Add(10 * time.Second)
	for h.Health().GetLifecycle().GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_EXPIRED {
		if time.Now().After(deadline) {
			t.Fatal("did not expire")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if st := h.Health().GetLifecycle(); st.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_EXPIRED {
		t.Fatalf("lifecycle %v", st)
	}
	if h.d.StopReason() != nil {
		t.Fatal("rayd stopped")
	}
	// SetTimeout revives it.
	if st, err := h.setTimeout(30_000, exact); err != nil || st.GetPhase() != raydv1.LifecyclePhase_LIFECYCLE_PHASE_ACTIVE {
		t.Fatalf("SetTimeout: %v %v", st, err)
	}
}

func TestParseFlagsLifecycleFD(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	cfg, err := ParseFlags(nil, getenv, io.Discard)
	if err != nil || cfg.LifecycleFD != -1 {
		t.Fatalf("default: %+v, %v", cfg, err)
	}
	cfg, err = ParseFlags([]string{"-lifecycle-fd", "9"}, getenv, io.Discard)
	if err != nil || cfg.LifecycleFD != 9 {
		t.Fatalf("-lifecycle-fd 9: %+v, %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"-lifecycle-fd", "2"},
		{"-lifecycle-fd", "-4"},
		{"-lifecycle-fd", "7", "-ready-fd", "7"},
		{"-lifecycle-fd", "7", "-hooks-fd", "7"},
		{"-lifecycle-fd", "7", "-memory-events-fd", "7"},
	} {
		if _, err := ParseFlags(bad, getenv, io.Discard); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if exitCode(nil) != ExitOK || exitCode(errors.New("x")) != ExitError || exitCode(fmt.Errorf("w: %w", ErrSandboxTimeout)) != 124 {
		t.Error("exitCode")
	}
}
