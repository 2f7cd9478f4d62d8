// Package pin sets CPU affinity for the harness (client side) and for the
// processes it measures (server side), so that on a 2-core machine the
// client and the daemon do not compete for one core.
package pin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Pinner places the client on one CPU and servers on another. A nil or
// disabled Pinner does nothing, so callers need not check.
type Pinner struct {
	// Client is the CPU of the harness process (client, SDK and the
	// in-process localvm platform); Server the CPU of sandboxes, peers
	// and floor children.
	Client, Server int
	enabled        bool
}

// New returns an enabled Pinner (client on CPU 1, servers on CPU 0) when
// want is set and the machine has at least 2 CPUs; otherwise a disabled one
// and the reason.
func New(want bool) (*Pinner, string) {
	if !want {
		return &Pinner{}, "not requested (-pin)"
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return &Pinner{}, "sched_getaffinity: " + err.Error()
	}
	if set.Count() < 2 || !set.IsSet(0) || !set.IsSet(1) {
		return &Pinner{}, fmt.Sprintf("needs CPUs 0 and 1 available, have %d", set.Count())
	}
	return &Pinner{Client: 1, Server: 0, enabled: true}, "client (harness, SDK, in-process localvm) on CPU 1; sandboxes, peer and floor children on CPU 0"
}

// Enabled reports whether the Pinner pins.
func (p *Pinner) Enabled() bool { return p != nil && p.enabled }

func only(cpu int) *unix.CPUSet {
	var s unix.CPUSet
	s.Set(cpu)
	return &s
}

// Threads sets the affinity of every thread of pid to cpu. Threads and
// children created later inherit it from their creator. Threads that exit
// meanwhile are ignored; it loops until a pass finds no new thread.
func Threads(pid, cpu int) error {
	done := map[int]bool{}
	for pass := 0; pass < 10; pass++ {
		ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
		if err != nil {
			return err
		}
		fresh := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh++
			done[tid] = true
			if err := unix.SchedSetaffinity(tid, only(cpu)); err != nil && !errors.Is(err, unix.ESRCH) {
				return fmt.Errorf("pin thread %d of %d: %w", tid, pid, err)
			}
		}
		if fresh == 0 {
			return nil
		}
	}
	return nil
}

// Self pins every thread of the harness process to the client CPU.
func (p *Pinner) Self() error {
	if !p.Enabled() {
		return nil
	}
	return Threads(os.Getpid(), p.Client)
}

// Pids pins every thread of each pid to the server CPU; processes that are
// gone are skipped.
func (p *Pinner) Pids(pids []int) error {
	if !p.Enabled() {
		return nil
	}
	for _, pid := range pids {
		if err := Threads(pid, p.Server); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// Start starts cmd so that the child begins life on the server CPU: the
// calling goroutine's OS thread is pinned to that CPU around the fork (the
// child inherits the forking thread's mask), then restored. Without
// pinning it is cmd.Start.
func (p *Pinner) Start(cmd *exec.Cmd) error {
	if !p.Enabled() {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return err
	}
	if err := unix.SchedSetaffinity(0, only(p.Server)); err != nil {
		return err
	}
	err := cmd.Start()
	if rerr := unix.SchedSetaffinity(0, &old); rerr != nil && err == nil {
		// The thread would stay on the server CPU: report it rather
		// than skew the client silently.
		err = fmt.Errorf("restore affinity: %w", rerr)
	}
	return err
}
