package proc

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// Expire ends every live process with status sandbox_timeout: SIGTERM,
// then SIGKILL after the grace for those that ignore it; ended processes
// keep their status and the supervisor keeps running.
func TestExpire(t *testing.T) {
	s := newTestSupervisor(t, Options{})
	done := run(t, s, sh("exit 4"))
	polite := start(t, s, Spec{Path: "/bin/sleep", Args: []string{"sleep", "30"}, Env: testEnv})
	stubborn := start(t, s, sh(`trap "" TERM; while :; do sleep 0.05; done`))
	pty := start(t, s, Spec{Path: "/bin/sh", Args: []string{"sh", "-c", "sleep 30"}, Env: testEnv, PTY: &PTYConfig{}})
	time.Sleep(100 * time.Millisecond) // let the trap be installed

	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n := s.Expire(ctx, 300*time.Millisecond); n != 3 {
		t.Fatalf("Expire marked %d, want 3", n)
	}
	if el := time.Since(begin); el < 300*time.Millisecond || el > 5*time.Second {
		t.Errorf("Expire took %v", el)
	}
	for name, c := range map[string]struct {
		p    *Process
		want ExitInfo
	}{
		"polite":   {polite, ExitInfo{ExitCode: 143, Signal: syscall.SIGTERM, Status: StatusSandboxTimeout, Err: ExitErrSandboxTimeout}},
		"stubborn": {stubborn, ExitInfo{ExitCode: 137, Signal: syscall.SIGKILL, Status: StatusSandboxTimeout, Err: ExitErrSandboxTimeout}},
	} {
		waitDone(t, c.p, 5*time.Second)
		if out := collect(t, c.p, 0); out.end.Exit != c.want {
			t.Errorf("%s: exit %+v, want %+v", name, out.end.Exit, c.want)
		}
	}
	waitDone(t, pty, 5*time.Second)
	if x, _ := pty.Exit(); x.Status != StatusSandboxTimeout {
		t.Errorf("pty exit %+v", x)
	}
	if done.end.Exit.Status != StatusExited || done.end.Exit.ExitCode != 4 {
		t.Errorf("an ended process changed: %+v", done.end.Exit)
	}
	if s.Live() != 0 {
		t.Errorf("%d live after Expire", s.Live())
	}
	// The supervisor still starts processes, which end normally.
	if out := run(t, s, sh("exit 0")); out.end.Exit.Status != StatusExited {
		t.Errorf("after Expire: %+v", out.end.Exit)
	}
	if n := s.Expire(ctx, time.Second); n != 0 {
		t.Errorf("Expire with nothing live marked %d", n)
	}
}
