package proc

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rayito-dev/rayito/rayd/internal/oomcount"
	"github.com/rayito-dev/rayito/rayd/internal/testcgroup"
)

func TestUnexplainedKill(t *testing.T) {
	t.Parallel()
	kill := rawExit{sig: syscall.SIGKILL}
	for _, c := range []struct {
		name     string
		r        rawExit
		timedOut bool
		killSent bool
		want     bool
	}{
		{"sigkill from elsewhere", kill, false, false, true},
		{"timeout", kill, true, false, false},
		{"rayd sent it", kill, false, true, false},
		{"sigterm", rawExit{sig: syscall.SIGTERM}, false, false, false},
		{"exit 137", rawExit{exited: true, code: 137}, false, false, false},
	} {
		if got := unexplainedKill(c.r, c.timedOut, c.killSent); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// fakeOOM is an OOM kill counter the test moves by hand.
type fakeOOM struct {
	n      atomic.Uint64
	broken atomic.Bool
}

func (f *fakeOOM) read() (uint64, bool) { return f.n.Load(), !f.broken.Load() }

// The decision on real processes with a fake counter: only a SIGKILL from
// outside rayd during whose life the count rose is oom_killed.
func TestOOMKilledDecision(t *testing.T) {
	var oom fakeOOM
	s := newTestSupervisor(t, Options{KillGrace: 100 * time.Millisecond, OOMKills: oom.read})
	oomExit := ExitInfo{ExitCode: 137, Signal: syscall.SIGKILL, Status: StatusOOMKilled}
	sigExit := ExitInfo{ExitCode: 137, Signal: syscall.SIGKILL, Status: StatusSignaled}
	sleeper := func() *Process {
		return start(t, s, Spec{Path: "/bin/sleep", Args: []string{"sleep", "30"}, Env: testEnv})
	}
	killFromOutside := func(p *Process) {
		t.Helper()
		if err := unix.Kill(p.Pid(), unix.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	// trapped starts a shell that ignores SIGTERM, once it does.
	trapped := func(spec Spec) *Process {
		t.Helper()
		p, sub, err := s.StartSubscribed(spec)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if ev, err := sub.Next(ctx); err != nil || ev.Kind != Data {
			t.Fatalf("no output from the shell: %+v, %v", ev, err)
		}
		return p
	}
	const trapTerm = `trap "" TERM; echo trapped; sleep 30`
	end := func(p *Process) ExitInfo {
		t.Helper()
		waitDone(t, p, 10*time.Second)
		e, _ := p.Exit()
		return e
	}

	p := sleeper()
	oom.n.Add(1)
	killFromOutside(p)
	if got := end(p); got != oomExit {
		t.Errorf("outside SIGKILL, count rose: %+v", got)
	}

	p = sleeper()
	killFromOutside(p)
	if got := end(p); got != sigExit {
		t.Errorf("outside SIGKILL, count still: %+v", got)
	}

	oom.n.Add(1) // before the start: not during its life
	p = sleeper()
	killFromOutside(p)
	if got := end(p); got != sigExit {
		t.Errorf("outside SIGKILL, count rose before the start: %+v", got)
	}

	p = sleeper()
	oom.n.Add(1)
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := end(p); got != sigExit {
		t.Errorf("Signal(SIGKILL), count rose: %+v", got)
	}

	// A SIGTERM from rayd does not explain a later SIGKILL.
	p = trapped(sh(trapTerm))
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	oom.n.Add(1)
	killFromOutside(p)
	if got := end(p); got != oomExit {
		t.Errorf("Signal(SIGTERM), then outside SIGKILL, count rose: %+v", got)
	}

	spec := sh(trapTerm)
	spec.Timeout = 500 * time.Millisecond
	p = trapped(spec)
	oom.n.Add(1)
	if got := end(p); got.Status != StatusTimeout || got.Signal != syscall.SIGKILL {
		t.Errorf("timeout, count rose: %+v", got)
	}

	p = start(t, s, sh(`sleep 0.2; exit 137`))
	oom.n.Add(1)
	if got := end(p); got != (ExitInfo{ExitCode: 137, Exited: true, Status: StatusExited}) {
		t.Errorf("exit 137, count rose: %+v", got)
	}

	p = start(t, s, Spec{Path: "/bin/sleep", Args: []string{"sleep", "30"}, Env: testEnv, PTY: &PTYConfig{}})
	oom.n.Add(1)
	killFromOutside(p)
	if got := end(p); got != oomExit {
		t.Errorf("PTY, outside SIGKILL, count rose: %+v", got)
	}

	p = sleeper()
	oom.n.Add(1)
	oom.broken.Store(true)
	killFromOutside(p)
	if got := end(p); got != sigExit {
		t.Errorf("counter unreadable at the end: %+v", got)
	}
	p = sleeper() // unreadable at the start
	oom.broken.Store(false)
	oom.n.Add(1)
	killFromOutside(p)
	if got := end(p); got != sigExit {
		t.Errorf("counter unreadable at the start: %+v", got)
	}

	// Shutdown's SIGKILL is rayd's.
	p = trapped(sh(trapTerm))
	oom.n.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Shutdown(ctx, 100*time.Millisecond)
	if got := end(p); got != sigExit {
		t.Errorf("Shutdown's SIGKILL, count rose: %+v", got)
	}
}

// Without a counter nothing is oom_killed.
func TestOOMKilledNeedsCounter(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	p := start(t, s, Spec{Path: "/bin/sleep", Args: []string{"sleep", "30"}, Env: testEnv})
	if err := unix.Kill(p.Pid(), unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(t, p, 10*time.Second)
	if got, _ := p.Exit(); got.Status != StatusSignaled {
		t.Fatalf("exit %+v", got)
	}
}

// TestOOMHogHelper is not a test: TestOOMKilledInCgroup runs it as a
// child that allocates in a memory cgroup until the OOM killer ends it.
func TestOOMHogHelper(t *testing.T) {
	if !testcgroup.Hog() {
		t.Skip("helper process for TestOOMKilledInCgroup")
	}
}

// End to end, as root: a process in a memory cgroup with a small limit
// allocates beyond it, the kernel's OOM killer ends it, and the supervisor
// reading that cgroup's OOM kill count reports oom_killed.
func TestOOMKilledInCgroup(t *testing.T) {
	cg := testcgroup.NewMemory(t, 64<<20)
	counter, err := oomcount.Open(cg.Events)
	if err != nil {
		t.Skipf("no OOM kill count in %s (Linux before 4.13?): %v", cg.Events, err)
	}
	defer counter.Close()
	before, _ := counter.Read()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := newTestSupervisor(t, Options{OOMKills: counter.Read})
	p := start(t, s, Spec{
		Path: exe,
		Args: []string{exe, "-test.run=^TestOOMHogHelper$", "-test.count=1"},
		Env:  []string{testcgroup.HogEnv + "=" + cg.Procs},
	})
	out := collect(t, p, 0)
	waitDone(t, p, time.Minute)
	want := ExitInfo{ExitCode: 137, Signal: syscall.SIGKILL, Status: StatusOOMKilled}
	if out.end.Exit != want {
		t.Fatalf("exit %+v, want %+v (stdout %q, stderr %q)", out.end.Exit, want, out.stdout.String(), out.stderr.String())
	}
	if after, _ := counter.Read(); after <= before {
		t.Fatalf("OOM kill count %d → %d", before, after)
	}
}
