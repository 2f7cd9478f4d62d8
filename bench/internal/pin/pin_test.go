package pin

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDisabledPinnerIsNoop(t *testing.T) {
	p, reason := New(false)
	if p.Enabled() || reason == "" {
		t.Fatalf("New(false) = %v, %q", p.Enabled(), reason)
	}
	var nilP *Pinner
	if nilP.Enabled() || nilP.Self() != nil || nilP.Pids([]int{1}) != nil {
		t.Fatal("nil Pinner should do nothing")
	}
	cmd := exec.Command("true")
	if err := nilP.Start(cmd); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

func TestStartPinsChildAndRestoresThread(t *testing.T) {
	p, reason := New(true)
	if !p.Enabled() {
		t.Skip(reason)
	}
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "5")
	if err := p.Start(cmd); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var got unix.CPUSet
	if err := unix.SchedGetaffinity(cmd.Process.Pid, &got); err != nil {
		t.Fatal(err)
	}
	if got.Count() != 1 || !got.IsSet(p.Server) {
		t.Fatalf("child mask count %d, server cpu set %v", got.Count(), got.IsSet(p.Server))
	}
	// Re-pin the child to the client CPU with Threads and read it back.
	if err := Threads(cmd.Process.Pid, p.Client); err != nil {
		t.Fatal(err)
	}
	if err := unix.SchedGetaffinity(cmd.Process.Pid, &got); err != nil {
		t.Fatal(err)
	}
	if !got.IsSet(p.Client) || got.Count() != 1 {
		t.Fatal("Threads did not move the child")
	}
	if err := Threads(os.Getpid()+1<<30, 0); err == nil {
		t.Fatal("Threads of a missing pid should fail")
	}
}
