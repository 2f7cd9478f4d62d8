package registry_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/localvm/internal/launcher"
	"github.com/rayito-dev/rayito/localvm/internal/registry"
	"github.com/rayito-dev/rayito/localvm/internal/registry/registrytest"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
)

// running starts a microVM and waits until it is RUNNING.
func running(t *testing.T, r *registry.Registry, in microvmsapi.RunMicrovmInput) microvmsapi.Microvm {
	t.Helper()
	m := run(t, r, in)
	return wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
}

func frozen(e *env, id string) bool {
	f, _, _ := e.l.Instance(id).Frozen()
	return f
}

func TestSuspendResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	m := running(t, r, microvmsapi.RunMicrovmInput{})
	if err := r.Suspend(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Get(m.MicrovmID); got.State != microvmsapi.StateSuspending && got.State != microvmsapi.StateSuspended {
		t.Fatalf("after Suspend: %s", got.State)
	}
	got := wait(t, r, m.MicrovmID, microvmsapi.StateSuspended)
	if got.StateReason != "" || got.TerminatedAt != nil {
		t.Fatalf("suspended: %+v", got)
	}
	waitFile(t, e.dir, m.MicrovmID, "SUSPENDED")
	if st := readState(t, e.dir, m.MicrovmID); st["suspendedAt"] == nil {
		t.Fatalf("state file without suspendedAt: %v", st)
	}
	if !frozen(e, m.MicrovmID) || e.hooks.Calls("suspend") != 1 {
		t.Fatalf("frozen %v, %d suspend hooks", frozen(e, m.MicrovmID), e.hooks.Calls("suspend"))
	}
	tg, _ := r.Lookup(m.Endpoint)
	if tg.Running() || tg.AutoResume() {
		t.Fatal("a SUSPENDED microVM without an idle policy is Running or AutoResume")
	}
	if _, err := tg.Addr(8080); !errors.Is(err, registry.ErrNotRunning) {
		t.Fatalf("Addr while suspended: %v", err)
	}
	// Suspending a SUSPENDED one does nothing and succeeds.
	for range 2 {
		if err := r.Suspend(t.Context(), m.MicrovmID); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if _, freezes, _ := e.l.Instance(m.MicrovmID).Frozen(); freezes != 1 || e.hooks.Calls("suspend") != 1 {
		t.Fatalf("repeated suspend: %d freezes, %d hooks", freezes, e.hooks.Calls("suspend"))
	}

	if err := r.Resume(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	waitFile(t, e.dir, m.MicrovmID, "RUNNING")
	if frozen(e, m.MicrovmID) || e.hooks.Calls("resume") != 1 {
		t.Fatalf("frozen %v, %d resume hooks", frozen(e, m.MicrovmID), e.hooks.Calls("resume"))
	}
	if !tg.Running() {
		t.Fatal("not Running after resume")
	}
	// Resuming a RUNNING one does nothing and succeeds.
	for range 2 {
		if err := r.Resume(t.Context(), m.MicrovmID); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if _, _, thaws := e.l.Instance(m.MicrovmID).Frozen(); thaws != 1 || e.hooks.Calls("resume") != 1 {
		t.Fatalf("repeated resume: %d thaws, %d hooks", thaws, e.hooks.Calls("resume"))
	}
	// And again.
	if err := r.Suspend(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateSuspended)
	if err := r.Resume(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	if e.hooks.Calls("suspend") != 2 || e.hooks.Calls("resume") != 2 {
		t.Fatalf("second cycle: %d suspend, %d resume hooks", e.hooks.Calls("suspend"), e.hooks.Calls("resume"))
	}
}

// TestSuspendWaits: with RunWait, Suspend and Resume answer once the
// microVM is SUSPENDED or RUNNING.
func TestSuspendWaits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.opts.RunWait = 10 * time.Second
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	if err := r.Suspend(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Get(m.MicrovmID); got.State != microvmsapi.StateSuspended {
		t.Fatalf("Suspend answered with %s", got.State)
	}
	if err := r.Resume(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Get(m.MicrovmID); got.State != microvmsapi.StateRunning {
		t.Fatalf("Resume answered with %s", got.State)
	}
}

func TestSuspendWrongState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.l.LaunchGate = make(chan struct{})
	r := e.open(t)
	m := run(t, r, microvmsapi.RunMicrovmInput{})
	wantType(t, r.Suspend(t.Context(), m.MicrovmID), microvmsapi.ConflictException)
	if err := r.Resume(t.Context(), m.MicrovmID); err != nil {
		t.Fatalf("Resume of a PENDING microVM: %v", err)
	}
	close(e.l.LaunchGate)
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	if err := r.Terminate(m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(context.Context, string) error{r.Suspend, r.Resume} {
		err := f(t.Context(), m.MicrovmID)
		wantType(t, err, microvmsapi.ConflictException)
		if !strings.Contains(err.Error(), "terminated") {
			t.Fatal(err)
		}
		wantType(t, f(t.Context(), "microvm-x"), microvmsapi.ResourceNotFoundException)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	wantType(t, r.Suspend(t.Context(), m.MicrovmID), microvmsapi.ConflictException)
}

// TestSuspendUnsupported: a platform without a cgroup freezer refuses
// suspend, resume and idle policies with a ValidationException that says
// why.
func TestSuspendUnsupported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.l.NoSuspend = errors.New("launcher: suspend needs the root platform's cgroup freezer: this platform runs rootless (no cgroups)")
	r := e.open(t)
	m := running(t, r, microvmsapi.RunMicrovmInput{})
	for _, f := range []func(context.Context, string) error{r.Suspend, r.Resume} {
		err := f(t.Context(), m.MicrovmID)
		wantType(t, err, microvmsapi.ValidationException)
		if !strings.Contains(err.Error(), "cgroup freezer") || !strings.Contains(err.Error(), "rootless") {
			t.Fatal(err)
		}
	}
	_, err := r.Run(t.Context(), microvmsapi.RunMicrovmInput{ImageIdentifier: "local",
		IdlePolicy: &microvmsapi.IdlePolicy{MaxIdleDurationSeconds: 60}})
	wantType(t, err, microvmsapi.ValidationException)
	if !strings.Contains(err.Error(), "idlePolicy") || !strings.Contains(err.Error(), "rootless") {
		t.Fatal(err)
	}
}

// TestTerminateSuspended: a SUSPENDED microVM is thawed, then gets its
// terminate hook, then is torn down; the state reason is the user's.
func TestTerminateSuspended(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	m := running(t, r, microvmsapi.RunMicrovmInput{})
	if err := r.Suspend(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateSuspended)
	if err := r.Terminate(m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	if got.StateReason != registry.ReasonKilledByUser {
		t.Fatalf("got %+v", got)
	}
	inst := e.l.Instance(m.MicrovmID)
	if f, _, thaws := inst.Frozen(); f || thaws != 1 || inst.Terminated() != 1 || e.hooks.Terminates() != 1 {
		t.Fatalf("frozen %v, %d thaws, %d Terminate, %d terminate hooks", f, thaws, inst.Terminated(), e.hooks.Terminates())
	}
}

// TestMaximumDurationWhileSuspended: suspended time counts.
func TestMaximumDurationWhileSuspended(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	m := running(t, r, microvmsapi.RunMicrovmInput{MaximumDurationInSeconds: 1})
	if err := r.Suspend(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateSuspended)
	got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	if got.StateReason != registry.ReasonMaxDuration {
		t.Fatalf("got %+v", got)
	}
	if d := got.TerminatedAt.Sub(*got.StartedAt); d < time.Second || d > 5*time.Second {
		t.Fatalf("terminated after %v", d)
	}
	if frozen(e, m.MicrovmID) {
		t.Fatal("left frozen")
	}
}

func TestResumeHookFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		delay  time.Duration
		want   string
	}{
		{"500", http.StatusInternalServerError, 0, "platform_error: resume hook failed with HTTP status 500"},
		{"timeout", http.StatusOK, 5 * time.Second, registry.ReasonResumeTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.hooks.SetResume(tc.status, tc.delay)
			e.opts.ResumeHookTimeout = 200 * time.Millisecond
			r := e.open(t)
			m := running(t, r, microvmsapi.RunMicrovmInput{})
			if err := r.Suspend(t.Context(), m.MicrovmID); err != nil {
				t.Fatal(err)
			}
			wait(t, r, m.MicrovmID, microvmsapi.StateSuspended)
			if err := r.Resume(t.Context(), m.MicrovmID); err != nil {
				t.Fatal(err)
			}
			if got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated); got.StateReason != tc.want {
				t.Fatalf("got %q, want %q", got.StateReason, tc.want)
			}
		})
	}
}

// TestFreezeFailure: a freeze that fails leaves the microVM RUNNING (and
// resumed).
func TestFreezeFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.l.FreezeErr = errors.New("freezer broken")
	r := e.open(t)
	m := running(t, r, microvmsapi.RunMicrovmInput{})
	if err := r.Suspend(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.hooks.Calls("resume") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no resume hook after a failed freeze")
		}
		time.Sleep(5 * time.Millisecond)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
}

// idleEnv is an env whose idle unit is 10 ms: maxIdleDurationSeconds 60
// is 600 ms.
func idleEnv(t *testing.T) *env {
	e := newEnv(t)
	e.opts.IdleUnit = 10 * time.Millisecond
	return e
}

func idlePolicy(maxIdle, suspended int, auto bool) *microvmsapi.IdlePolicy {
	return &microvmsapi.IdlePolicy{MaxIdleDurationSeconds: maxIdle, SuspendedDurationSeconds: suspended, AutoResumeEnabled: auto}
}

// TestIdleSuspendThenTerminate: no traffic for maxIdle suspends; then
// suspendedDuration suspended terminates with reason idle.
func TestIdleSuspendThenTerminate(t *testing.T) {
	t.Parallel()
	e := idleEnv(t)
	r := e.open(t)
	m := running(t, r, microvmsapi.RunMicrovmInput{IdlePolicy: idlePolicy(60, 60, false)})
	start := time.Now()
	wait(t, r, m.MicrovmID, microvmsapi.StateSuspended)
	suspended := time.Now()
	if d := suspended.Sub(start); d < 550*time.Millisecond {
		t.Fatalf("suspended after %v, before 600 ms idle", d)
	}
	if !frozen(e, m.MicrovmID) {
		t.Fatal("not frozen")
	}
	got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated)
	if got.StateReason != "idle" {
		t.Fatalf("got %+v", got)
	}
	if d := time.Since(suspended); d < 550*time.Millisecond {
		t.Fatalf("terminated %v after the suspension, before 600 ms", d)
	}
	if frozen(e, m.MicrovmID) || e.l.Instance(m.MicrovmID).Terminated() != 1 {
		t.Fatal("not torn down")
	}
}

// TestIdleZeroSuspendedDuration: suspendedDurationSeconds 0 terminates at
// the suspension.
func TestIdleZeroSuspendedDuration(t *testing.T) {
	t.Parallel()
	e := idleEnv(t)
	r := e.open(t)
	m := running(t, r, microvmsapi.RunMicrovmInput{IdlePolicy: idlePolicy(60, 0, true)})
	if got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated); got.StateReason != registry.ReasonIdle {
		t.Fatalf("got %+v", got)
	}
}

// TestIdleActivityKeepsAwake: a request in flight (a silent stream), or
// bytes now and then, keep a microVM RUNNING past maxIdle.
func TestIdleActivityKeepsAwake(t *testing.T) {
	t.Parallel()
	e := idleEnv(t)
	r := e.open(t)
	a := running(t, r, microvmsapi.RunMicrovmInput{IdlePolicy: idlePolicy(60, 6000, false)})
	b := running(t, r, microvmsapi.RunMicrovmInput{IdlePolicy: idlePolicy(60, 6000, false)})
	ta, _ := r.Lookup(a.Endpoint)
	tb, _ := r.Lookup(b.Endpoint)
	ta.Activity().Begin() // a stream, silent
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				tb.Activity().Out(10)
			}
		}
	})
	time.Sleep(1500 * time.Millisecond)
	for _, m := range []microvmsapi.Microvm{a, b} {
		if got, _ := r.Get(m.MicrovmID); got.State != microvmsapi.StateRunning {
			t.Fatalf("%s is %s despite its traffic", m.MicrovmID, got.State)
		}
	}
	ta.Activity().End()
	close(stop)
	wg.Wait()
	wait(t, r, a.MicrovmID, microvmsapi.StateSuspended)
	wait(t, r, b.MicrovmID, microvmsapi.StateSuspended)
}

// TestWake: a SUSPENDED microVM that auto-resumes is resumed by Wake
// (what the proxy calls for a request); one that does not is refused.
func TestWake(t *testing.T) {
	t.Parallel()
	e := idleEnv(t)
	e.hooks.SetResume(http.StatusOK, 100*time.Millisecond)
	r := e.open(t)
	auto := running(t, r, microvmsapi.RunMicrovmInput{IdlePolicy: idlePolicy(60, 6000, true)})
	manual := running(t, r, microvmsapi.RunMicrovmInput{IdlePolicy: idlePolicy(60, 6000, false)})
	wait(t, r, auto.MicrovmID, microvmsapi.StateSuspended)
	wait(t, r, manual.MicrovmID, microvmsapi.StateSuspended)
	ta, _ := r.Lookup(auto.Endpoint)
	tm, _ := r.Lookup(manual.Endpoint)
	if !ta.AutoResume() || tm.AutoResume() {
		t.Fatalf("AutoResume: %v, %v", ta.AutoResume(), tm.AutoResume())
	}
	if err := tm.Wake(t.Context()); !errors.Is(err, registry.ErrNotRunning) {
		t.Fatalf("Wake without auto-resume: %v", err)
	}
	ta.Activity().Begin() // the proxy holds the request as in flight
	start := time.Now()
	if err := ta.Wake(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !ta.Running() || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("Wake returned after %v, running %v", time.Since(start), ta.Running())
	}
	// The held request keeps it awake, then it idles again.
	time.Sleep(800 * time.Millisecond)
	if !ta.Running() {
		t.Fatal("suspended under a request in flight")
	}
	ta.Activity().End()
	wait(t, r, auto.MicrovmID, microvmsapi.StateSuspended)
	// A Wake that gives up answers ErrNotRunning.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := ta.Wake(ctx); !errors.Is(err, registry.ErrNotRunning) {
		t.Fatalf("Wake with an ended context: %v", err)
	}
	if err := r.Terminate(auto.MicrovmID); err != nil {
		t.Fatal(err)
	}
	if err := ta.Wake(t.Context()); !errors.Is(err, registry.ErrNotRunning) {
		t.Fatalf("Wake of a terminated microVM: %v", err)
	}
}

// TestLifecycleSuspendRequest: rayd's pause-on-timeout request suspends
// the microVM; another within a second of the first is ignored.
func TestLifecycleSuspendRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	m := running(t, r, microvmsapi.RunMicrovmInput{})
	inst := e.l.Instance(m.MicrovmID)
	inst.RequestSuspend()
	wait(t, r, m.MicrovmID, microvmsapi.StateSuspended)
	if err := r.Resume(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r, m.MicrovmID, microvmsapi.StateRunning)
	inst.RequestSuspend() // too soon
	time.Sleep(100 * time.Millisecond)
	if got, _ := r.Get(m.MicrovmID); got.State != microvmsapi.StateRunning {
		t.Fatalf("a second request within a second: %s", got.State)
	}
	time.Sleep(time.Second)
	inst.RequestSuspend()
	wait(t, r, m.MicrovmID, microvmsapi.StateSuspended)
}

// TestReopenSuspended: a restarted platform re-adopts a SUSPENDED
// microVM as SUSPENDED (and frozen), and a SUSPENDING one is suspended
// again; both resume.
func TestReopenSuspended(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r1 := e.open(t)
	m := running(t, r1, microvmsapi.RunMicrovmInput{})
	if err := r1.Suspend(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r1, m.MicrovmID, microvmsapi.StateSuspended)
	waitFile(t, e.dir, m.MicrovmID, "SUSPENDED")
	suspendedAt := readState(t, e.dir, m.MicrovmID)["suspendedAt"]
	e.restart(t, r1, m.MicrovmID)
	r2 := e.open(t)
	if got, _ := r2.Get(m.MicrovmID); got.State != microvmsapi.StateSuspended {
		t.Fatalf("after the restart: %+v", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !frozen(e, m.MicrovmID) {
		if time.Now().After(deadline) {
			t.Fatal("the adopted sandbox is not frozen")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := readState(t, e.dir, m.MicrovmID)["suspendedAt"]; got != suspendedAt {
		t.Fatalf("suspendedAt %v, was %v", got, suspendedAt)
	}
	if err := r2.Resume(t.Context(), m.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r2, m.MicrovmID, microvmsapi.StateRunning)

	// SUSPENDING when the platform stopped: suspended again.
	started := time.Now().UTC()
	const id = "microvm-00000000-0000-4000-8000-0000000000aa"
	writeState(t, e.dir, id, microvmsapi.Microvm{State: microvmsapi.StateSuspending, StartedAt: &started, MaximumDurationInSeconds: 600},
		&launcher.Record{ID: id, Pid: 1, HooksAddr: e.hooks.Addr()})
	e.restart(t, r2, m.MicrovmID, id)
	// Counted before the platform opens: its adoption may suspend at once.
	before := e.hooks.Calls("suspend")
	r3 := e.open(t)
	wait(t, r3, id, microvmsapi.StateSuspended)
	if !frozen(e, id) || e.hooks.Calls("suspend") != before+1 {
		t.Fatalf("SUSPENDING re-adopted: frozen %v, %d suspend hooks", frozen(e, id), e.hooks.Calls("suspend")-before)
	}
	if err := r3.Terminate(id); err != nil {
		t.Fatal(err)
	}
	wait(t, r3, id, microvmsapi.StateTerminated)
	if frozen(e, id) {
		t.Fatal("terminated frozen")
	}
}

// TestSuspendRaces: suspends, resumes and a terminate from many
// goroutines end in TERMINATED with nothing left frozen.
func TestSuspendRaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	var ids []string
	for range 5 {
		ids = append(ids, running(t, r, microvmsapi.RunMicrovmInput{}).MicrovmID)
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		for i := range 6 {
			wg.Go(func() {
				for range 5 {
					switch i % 3 {
					case 0:
						_ = r.Suspend(t.Context(), id)
					case 1:
						_ = r.Resume(t.Context(), id)
					default:
						_, _ = r.Get(id)
					}
				}
				if i == 5 {
					_ = r.Terminate(id)
				}
			})
		}
	}
	wg.Wait()
	for _, id := range ids {
		wait(t, r, id, microvmsapi.StateTerminated)
		if frozen(e, id) || e.l.Instance(id).Terminated() != 1 {
			t.Fatalf("%s: frozen %v, %d Terminate", id, frozen(e, id), e.l.Instance(id).Terminated())
		}
	}
}

// TestExitReasons: how rayd's end becomes the state reason, OOM kill
// counter included.
func TestExitReasons(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		end  func(i *registrytest.Instance)
		want string
	}{
		{"exit 3", func(i *registrytest.Instance) {
			i.Exit(3)
		}, "init_exited: exit status 3"},
		{"timeout", func(i *registrytest.Instance) {
			i.Exit(124)
		}, "timeout"},
		{"sigkill", func(i *registrytest.Instance) {
			i.Kill(syscall.SIGKILL)
		}, "init_exited: killed by signal 9 (killed)"},
		{"oom", func(i *registrytest.Instance) {
			i.SetOOMKills(1)
			i.Kill(syscall.SIGKILL)
		}, "out_of_memory"},
		{"oom of another process, then exit", func(i *registrytest.Instance) {
			i.SetOOMKills(2)
			i.Exit(1)
		}, "init_exited: exit status 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.l.OOMCounter = true
			r := e.open(t)
			m := running(t, r, microvmsapi.RunMicrovmInput{})
			time.Sleep(20 * time.Millisecond) // the first counter sample
			tc.end(e.l.Instance(m.MicrovmID))
			if got := wait(t, r, m.MicrovmID, microvmsapi.StateTerminated); got.StateReason != tc.want {
				t.Fatalf("got %q, want %q", got.StateReason, tc.want)
			}
		})
	}
}

// TestReasonsClosedSet: every reason the registry sets has a known code.
func TestReasonsClosedSet(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, c := range registry.Reasons() {
		known[c] = true
	}
	for _, r := range []string{registry.ReasonKilledByUser, registry.ReasonPlatformLost, registry.ReasonPlatformStopped,
		registry.ReasonTerminateAll, registry.ReasonLaunchFailed, registry.ReasonRunHookTimeout, registry.ReasonRunHookFailed,
		registry.ReasonResumeTimeout, registry.ReasonResumeFailed, registry.ReasonFreezerFailed, registry.ReasonExitStatusUnknown,
		registry.ReasonIdle, registry.ReasonMaxDuration, registry.ReasonTimeout, registry.ReasonOutOfMemory} {
		if !known[registry.ReasonCode(r)] {
			t.Errorf("%q has an unknown code", r)
		}
	}
	if registry.ReasonCode("init_exited: exit status 3") != "init_exited" || registry.ReasonCode("idle") != "idle" {
		t.Fatal("ReasonCode")
	}
}

// TestTerminateAllReason and the rest of the platform's reasons.
func TestTerminateAllReason(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.open(t)
	a := running(t, r, microvmsapi.RunMicrovmInput{})
	b := running(t, r, microvmsapi.RunMicrovmInput{})
	if err := r.Suspend(t.Context(), b.MicrovmID); err != nil {
		t.Fatal(err)
	}
	wait(t, r, b.MicrovmID, microvmsapi.StateSuspended)
	if err := r.TerminateAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, m := range []microvmsapi.Microvm{a, b} {
		got, _ := r.Get(m.MicrovmID)
		if got.State != microvmsapi.StateTerminated || got.StateReason != registry.ReasonTerminateAll ||
			registry.ReasonCode(got.StateReason) != "platform_shutdown" {
			t.Fatalf("%+v", got)
		}
	}
	if frozen(e, b.MicrovmID) {
		t.Fatal("left frozen")
	}
}
