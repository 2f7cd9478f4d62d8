package hooks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// post posts hook from the given source address and returns the status and
// the decoded reply, whatever the status.
func post(t *testing.T, base, from, hook string) (int, reply) {
	t.Helper()
	resp, err := clientFrom(from).Post(base+PathPrefix+hook, "application/json", strings.NewReader(""))
	if err != nil {
		t.Fatalf("POST %s: %v", hook, err)
	}
	defer resp.Body.Close()
	var r reply
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("reply %q: %v", raw, err)
	}
	return resp.StatusCode, r
}

func TestReadyWaitsForReadiness(t *testing.T) {
	var ready atomic.Bool
	base, s, _ := startServer(t, Options{Lifecycle: newFake(), Ready: ready.Load})
	status, r := post(t, base, fromPlatform, HookReady)
	if status != http.StatusServiceUnavailable || r.Outcome != OutcomeKernelWarming || r.Phase != PhaseBooting {
		t.Fatalf("not ready: %d %+v", status, r)
	}
	ready.Store(true)
	want(t, call(t, base, fromPlatform, HookReady, ""), OutcomeChanged, PhaseReady)
	if s.Anomalies() != 0 {
		t.Errorf("anomalies %d", s.Anomalies())
	}
}

// After /run nothing restarts: /ready is ready_escape and /validate
// validate_skipped, from the platform too; from an unknown caller they are
// anomalies.
func TestReadyAndValidateAfterRun(t *testing.T) {
	f := newFake()
	base, s, _ := startServer(t, Options{Lifecycle: f, Ready: func() bool { return false }})
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
	want(t, call(t, base, fromPlatform, HookReady, ""), OutcomeReadyEscape, PhaseRunning)
	want(t, call(t, base, fromPlatform, HookValidate, ""), OutcomeValidateSkipped, PhaseRunning)
	if s.Anomalies() != 0 {
		t.Errorf("anomalies %d from the platform", s.Anomalies())
	}
	want(t, call(t, base, fromNotFound, HookReady, ""), OutcomeReadyEscape, PhaseRunning)
	want(t, call(t, base, fromNotFound, HookValidate, ""), OutcomeValidateSkipped, PhaseRunning)
	if s.Anomalies() != 2 {
		t.Errorf("anomalies %d, want 2", s.Anomalies())
	}
	if _, _, v := f.counts(); v != 0 {
		t.Errorf("Validate ran %d times after /run", v)
	}
}

func TestConcurrentValidate(t *testing.T) {
	f := newFake()
	f.validateGate = make(chan struct{})
	base, _, _ := startServer(t, Options{Lifecycle: f})
	first := make(chan reply, 1)
	go func() {
		_, r := post(t, base, fromPlatform, HookValidate)
		first <- r
	}()
	waitFor(t, "the first validation", func() bool { _, _, v := f.counts(); return v == 1 })
	status, r := post(t, base, fromPlatform, HookValidate)
	if status != http.StatusServiceUnavailable || r.Outcome != OutcomeValidating {
		t.Fatalf("second /validate: %d %+v", status, r)
	}
	close(f.validateGate)
	if r := <-first; r.Outcome != OutcomeValidated {
		t.Fatalf("first /validate: %+v", r)
	}
}

func TestSuspendResume(t *testing.T) {
	f := newFake()
	f.streams = 3
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	base, s, _ := startServer(t, Options{Lifecycle: f, Now: now, OnResume: func(context.Context) bool { return true }})
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)

	r := call(t, base, fromPlatform, HookSuspend, "")
	want(t, r, OutcomeChanged, PhaseSuspending)
	if r.StreamsClosed == nil || *r.StreamsClosed != 3 || r.SuspendGeneration != 1 || r.ResumeGeneration != 0 || r.KernelStateLost != nil {
		t.Fatalf("suspend reply %+v", r)
	}
	r = call(t, base, fromPlatform, HookSuspend, "")
	want(t, r, OutcomeUnchanged, PhaseSuspending)
	if r.StreamsClosed != nil || r.SuspendGeneration != 1 {
		t.Fatalf("repeated suspend reply %+v", r)
	}

	offset.Store(int64(90 * time.Second)) // the paused time
	r = call(t, base, fromPlatform, HookResume, "")
	want(t, r, OutcomeChanged, PhaseResumed)
	if r.ResumeGeneration != 1 || r.SuspendGeneration != 1 || r.KernelStateLost == nil || !*r.KernelStateLost {
		t.Fatalf("resume reply %+v", r)
	}
	want(t, call(t, base, fromPlatform, HookResume, ""), OutcomeUnchanged, PhaseResumed)
	st := s.Status()
	if st.Phase != PhaseResumed || st.ResumeGeneration != 1 || st.SuspendGeneration != 1 || !st.KernelStateLost ||
		st.ClockOffset < 90*time.Second || st.ClockOffset > 95*time.Second {
		t.Fatalf("status %+v", st)
	}
	// Resumed behaves like running: it can be suspended again.
	r = call(t, base, fromPlatform, HookSuspend, "")
	want(t, r, OutcomeChanged, PhaseSuspending)
	if r.SuspendGeneration != 2 {
		t.Fatalf("second suspend %+v", r)
	}
	if sus, res, _ := f.counts(); sus != 2 || res != 1 {
		t.Fatalf("suspends %d resumes %d", sus, res)
	}
	if s.Anomalies() != 0 {
		t.Errorf("anomalies %d", s.Anomalies())
	}
}

// /suspend answers 200 in time even when its work overruns the budget.
func TestSuspendBudgetExceeded(t *testing.T) {
	f := newFake()
	f.suspendGate = make(chan struct{})
	const budget = 200 * time.Millisecond
	base, _, _ := startServer(t, Options{Lifecycle: f, SuspendBudget: budget})
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
	start := time.Now()
	r := call(t, base, fromPlatform, HookSuspend, "")
	if el := time.Since(start); el < budget || el > budget+2*time.Second {
		t.Errorf("answered after %v, budget %v", el, budget)
	}
	want(t, r, OutcomeBudgetExceeded, PhaseSuspending)
	if r.StreamsClosed != nil || r.SuspendGeneration != 1 {
		t.Errorf("reply %+v", r)
	}
	// A /resume waits for the suspend's work to end.
	done := make(chan reply, 1)
	go func() { done <- call(t, base, fromPlatform, HookResume, "") }()
	select {
	case r := <-done:
		t.Fatalf("resume overtook the suspend work: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	close(f.suspendGate)
	want(t, <-done, OutcomeChanged, PhaseResumed)
}

// Without a freeze within StaleSuspend, the watchdog reopens the gate.
func TestStaleSuspendWatchdog(t *testing.T) {
	f := newFake()
	base, s, _ := startServer(t, Options{Lifecycle: f, StaleSuspend: 200 * time.Millisecond, WatchdogTick: 10 * time.Millisecond})
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
	want(t, call(t, base, fromPlatform, HookSuspend, ""), OutcomeChanged, PhaseSuspending)
	waitFor(t, "the watchdog", func() bool { return s.Phase() == PhaseRunning })
	st := s.Status()
	if st.StaleSuspends != 1 || st.ResumeGeneration != 1 || st.SuspendGeneration != 1 {
		t.Fatalf("status %+v", st)
	}
	if _, res, _ := f.counts(); res != 1 {
		t.Fatalf("resumes %d", res)
	}
	// A late /resume finds nothing to do.
	want(t, call(t, base, fromPlatform, HookResume, ""), OutcomeUnchanged, PhaseRunning)
	// The next suspend is guarded again.
	want(t, call(t, base, fromPlatform, HookSuspend, ""), OutcomeChanged, PhaseSuspending)
	waitFor(t, "the second watchdog", func() bool { return s.Status().StaleSuspends == 2 })
}

// A jump in the clock means the VM froze: the watchdog stands down and the
// gate stays closed until /resume.
func TestWatchdogSeesFreeze(t *testing.T) {
	f := newFake()
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	base, s, _ := startServer(t, Options{Lifecycle: f, Now: now,
		StaleSuspend: 2 * time.Second, WatchdogTick: 10 * time.Millisecond, FreezeJump: 100 * time.Millisecond})
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
	want(t, call(t, base, fromPlatform, HookSuspend, ""), OutcomeChanged, PhaseSuspending)
	// Frozen for an hour: the next tick, well within the stale period
	// even on a loaded machine, sees the jump; past the stale period the
	// gate must still be closed.
	offset.Store(int64(time.Hour))
	time.Sleep(2500 * time.Millisecond)
	if st := s.Status(); st.Phase != PhaseSuspending || st.StaleSuspends != 0 {
		t.Fatalf("after a freeze: %+v", st)
	}
	want(t, call(t, base, fromPlatform, HookResume, ""), OutcomeChanged, PhaseResumed)
	if off := s.Status().ClockOffset; off < time.Hour {
		t.Fatalf("clock offset %v", off)
	}
}

// A /terminate stops the watchdog of a pending suspend.
func TestTerminateStopsWatchdog(t *testing.T) {
	f := newFake()
	// The stale period is long enough for the /terminate to arrive
	// before it on a loaded machine.
	base, s, _ := startServer(t, Options{Lifecycle: f, StaleSuspend: time.Second, WatchdogTick: 10 * time.Millisecond})
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
	want(t, call(t, base, fromPlatform, HookSuspend, ""), OutcomeChanged, PhaseSuspending)
	want(t, call(t, base, fromPlatform, HookTerminate, ""), OutcomeTerminating, PhaseTerminating)
	time.Sleep(1300 * time.Millisecond)
	if st := s.Status(); st.Phase != PhaseTerminating || st.StaleSuspends != 0 {
		t.Fatalf("status %+v", st)
	}
}

// Concurrent suspends and resumes from all sides keep the generations
// consistent (run with -race).
func TestConcurrentSuspendResume(t *testing.T) {
	f := newFake()
	base, s, _ := startServer(t, Options{Lifecycle: f})
	want(t, call(t, base, fromPlatform, HookRun, env("vm", "p")), OutcomeInstalled, PhaseRunning)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 6 {
				h := HookSuspend
				if (i+j)%2 == 1 {
					h = HookResume
				}
				from := fromPlatform
				if i%3 == 0 {
					from = fromSandbox
				}
				post(t, base, from, h)
			}
		})
	}
	wg.Wait()
	st := s.Status()
	sus, res, _ := f.counts()
	if uint64(sus) != st.SuspendGeneration || uint64(res) != st.ResumeGeneration {
		t.Fatalf("status %+v, suspends %d resumes %d", st, sus, res)
	}
	if d := st.SuspendGeneration - st.ResumeGeneration; d > 1 || (d == 1) != (st.Phase == PhaseSuspending) {
		t.Fatalf("generations and phase disagree: %+v", st)
	}
}
