// Package suites holds one file per benchmark suite of BENCHMARKS.md §2.
// Each suite runs the subjects F (floor), R (Rayito through the public SDK)
// and, where a peer is given, P, through harness.Loop, and returns a
// harness.Result; a failing suite returns a Result with Error set.
package suites

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	"github.com/rayito-dev/rayito/bench/internal/peer"
	"github.com/rayito-dev/rayito/bench/internal/pin"
	"github.com/rayito-dev/rayito/bench/internal/procfs"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Env is what the suites share during one run.
type Env struct {
	// Endpoint is the local platform's URL.
	Endpoint string
	// Tmp is a private temporary directory (removed by the runner).
	Tmp string
	// Pin places the harness and the measured processes on CPUs; it may
	// be disabled.
	Pin *pin.Pinner
	// Peer is the envd client, nil when no peer was given.
	Peer *peer.Client
	// Proc is /proc (tests may substitute it).
	Proc procfs.Root
	// KernelStart is the platform's -kernel-start (reported by runcode).
	KernelStart string
	// Progress receives progress lines (stderr); never payloads.
	Progress io.Writer

	// Iterations, when > 0, caps the measured iterations of every suite.
	Iterations int
	// Warmup, when >= 0, replaces every suite's warm-up count.
	Warmup int
	// DensityMax is the last density level; DensityWorkers the number of
	// goroutines creating sandboxes; MemoryN the sandboxes of the memory
	// suite; Idle the memory suite's idle wait.
	DensityMax     int
	DensityWorkers int
	MemoryN        int
	Idle           time.Duration

	// Prebooted, when set, returns a second platform that keeps
	// sandboxes pre-booted, for the create suite's second result (the
	// runner starts it on first use and stops it at the end of the run).
	Prebooted func(ctx context.Context) (*PrebootedPlatform, error)

	warm  *rayito.Sandbox
	extra []harness.Result
}

// PrebootedPlatform is a platform with a pool of pre-booted sandboxes.
type PrebootedPlatform struct {
	// Endpoint is its URL; N the size of its pool.
	Endpoint string
	N        int
	// WaitFull waits until its pool holds N sandboxes again.
	WaitFull func(ctx context.Context) error
	// Unavailable, when set, says why there is no pool (not root).
	Unavailable string
}

// AddResult adds a result besides the one a suite returns (the create
// suite's pre-booted variant); the runner reports it after that one.
func (e *Env) AddResult(r harness.Result) { e.extra = append(e.extra, r) }

// TakeResults returns the results added since the last call.
func (e *Env) TakeResults() []harness.Result {
	out := e.extra
	e.extra = nil
	return out
}

// n is a suite's measured iterations: its default, capped by -iterations.
func (e *Env) n(def int) int {
	if e.Iterations > 0 {
		return min(def, e.Iterations)
	}
	return def
}

// warmup is a suite's warm-up count: its default, replaced by -warmup and
// capped by -iterations.
func (e *Env) warmup(def int) int {
	if e.Warmup >= 0 {
		return e.Warmup
	}
	if e.Iterations > 0 {
		return min(def, e.Iterations)
	}
	return def
}

func (e *Env) progress(format string, args ...any) {
	if e.Progress != nil {
		fmt.Fprintf(e.Progress, "bench: "+format+"\n", args...)
	}
}

func (e *Env) opts() []rayito.Option {
	return []rayito.Option{rayito.WithBackend(rayito.BackendLocal), rayito.WithEndpoint(e.Endpoint)}
}

// create starts a sandbox (timed by the caller); pinning is separate.
func (e *Env) create(ctx context.Context) (*rayito.Sandbox, error) {
	return rayito.Create(ctx, e.opts()...)
}

// pinSandboxes moves every thread of the sandboxes' processes (init, rayd,
// their children) to the server CPU. It is a no-op without pinning.
func (e *Env) pinSandboxes(sbxs ...*rayito.Sandbox) error {
	if !e.Pin.Enabled() || len(sbxs) == 0 {
		return nil
	}
	ids := make([]string, len(sbxs))
	for i, s := range sbxs {
		ids[i] = s.ID()
	}
	byID, err := e.Proc.PidsByCgroup(ids...)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if len(byID[id]) == 0 {
			return fmt.Errorf("pin: no process found in the cgroup of %s", id)
		}
		if err := e.Pin.Pids(byID[id]); err != nil {
			return err
		}
	}
	return nil
}

// kill ends sandboxes outside any timer, with its own deadline.
func kill(sbxs ...*rayito.Sandbox) {
	for _, s := range sbxs {
		if s == nil {
			continue
		}
		kctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = s.Kill(kctx)
		cancel()
	}
}

// killAndWait ends sandboxes like kill, then waits (up to 20 s) until the
// platform reports each one TERMINATED, so that their teardown does not
// run during the next measurement.
func killAndWait(sbxs ...*rayito.Sandbox) {
	kill(sbxs...)
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range sbxs {
		if s == nil {
			continue
		}
		for time.Now().Before(deadline) {
			ictx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			info, err := s.Info(ictx)
			cancel()
			if err != nil || info.State == "TERMINATED" {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Warm returns the shared warm sandbox of the exec, stream, files and pty
// suites, creating (and pinning) it on first use.
func (e *Env) Warm(ctx context.Context) (*rayito.Sandbox, error) {
	if e.warm != nil {
		return e.warm, nil
	}
	s, err := e.create(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.pinSandboxes(s); err != nil {
		kill(s)
		return nil, err
	}
	e.warm = s
	return s, nil
}

// Close kills the warm sandbox.
func (e *Env) Close() {
	kill(e.warm)
	e.warm = nil
}

// nsFlags are the namespaces of a sandbox (minus user): pid, mount, uts,
// ipc and net. They need root; without it floors run plain.
const nsFlags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWNET

// namespaced reports whether floor processes get the sandbox namespaces.
func namespaced() bool { return os.Geteuid() == 0 }

// nsNote says how floor processes were spawned.
func nsNote() string {
	if namespaced() {
		return "in new pid+mnt+uts+ipc+net namespaces"
	}
	return "plain (not root: no namespaces)"
}

// floorCmd builds a floor command, namespaced when root.
func floorCmd(argv ...string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	if namespaced() {
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: nsFlags}
	}
	return cmd
}

// runFloor starts cmd through the pinner (so the child begins on the
// server CPU) and waits, returning its stdout.
func (e *Env) runFloor(cmd *exec.Cmd) ([]byte, error) {
	var out limitedBuffer
	cmd.Stdout = &out
	if err := e.Pin.Start(cmd); err != nil {
		return nil, err
	}
	err := cmd.Wait()
	return out.b, err
}

// limitedBuffer keeps the first 4 KiB written to it.
type limitedBuffer struct{ b []byte }

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - len(l.b); room > 0 {
		l.b = append(l.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// timeIt runs fn and returns its duration in ms.
func timeIt(fn func() error) (float64, error) {
	t := time.Now()
	err := fn()
	return harness.Ms(time.Since(t)), err
}

// failed is the Result of a suite that could not finish.
func failed(suite string, err error) harness.Result {
	return harness.Result{Suite: suite, Error: err.Error()}
}

// floorCmdPlain builds a floor command without namespaces.
func floorCmdPlain(argv ...string) *exec.Cmd { return exec.Command(argv[0], argv[1:]...) }
