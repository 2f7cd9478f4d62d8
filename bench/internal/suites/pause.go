package suites

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
)

// Pause is pause and resume of a sandbox with a process running in it
// (issue 11): R = Sandbox.Pause (SuspendMicrovm, the /suspend hook, the
// cgroup freezer, SUSPENDED) and "R resume" = Sandbox.Resume (thaw, the
// /resume hook, RUNNING, Health ready), n=30 each. The floor is the
// kernel's freezer alone: freeze ("F") and thaw ("F thaw") of a cgroup
// holding one sleeping process, where the machine has a freezer and the
// bench runs as root.
func Pause(ctx context.Context, e *Env) harness.Result {
	sbx, err := e.create(ctx)
	if err != nil {
		return failed("pause", fmt.Errorf("create: %w", err))
	}
	defer killAndWait(sbx)
	if _, err := sbx.Commands.Start(ctx, "while :; do sleep 0.01; done"); err != nil {
		return failed("pause", fmt.Errorf("start: %w", err))
	}
	fz, ferr := newFreezer()
	if fz != nil {
		defer fz.close()
	}
	subjects := []harness.Subject{
		{Name: "F", Optional: true, Run: func(context.Context) (float64, error) {
			if ferr != nil {
				return 0, ferr
			}
			return timeIt(func() error { return fz.set(true) })
		}},
		{Name: "F thaw", Optional: true, Run: func(context.Context) (float64, error) {
			if ferr != nil {
				return 0, ferr
			}
			return timeIt(func() error { return fz.set(false) })
		}},
		{Name: "R", Run: func(ctx context.Context) (float64, error) {
			return timeIt(func() error { return sbx.Pause(ctx) })
		}},
		{Name: "R resume", Run: func(ctx context.Context) (float64, error) {
			return timeIt(func() error { return sbx.Resume(ctx) })
		}},
	}
	s, err := harness.Loop(ctx, e.warmup(2), e.n(30), subjects...)
	if err != nil {
		return failed("pause", err)
	}
	r := harness.FromSamples("pause", "ms", false, s,
		"R = Sandbox.Pause (SuspendMicrovm, /suspend, cgroup freezer, until SUSPENDED), R resume = Sandbox.Resume (thaw, /resume, until RUNNING and Health ready), on a sandbox running a shell loop; F = freeze, F thaw = thaw of a cgroup holding one sleep (the kernel's freezer alone)")
	if res := r.Extra["R resume"]; res != nil {
		r.SetMetric(harness.MetricResumeP50, res.P50)
		r.SetMetric(harness.MetricResumeP95, res.P95)
	}
	return r
}

// freezer is a cgroup of its own with one sleeping process, frozen and
// thawed by the floor.
type freezer struct {
	dir   string
	state string // the file to write, freezer.state (v1) or cgroup.freeze (v2)
	v2    bool
	cmd   *exec.Cmd
}

func newFreezer() (*freezer, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the freezer floor needs root")
	}
	name := fmt.Sprintf("rayito-bench-freezer-%d", os.Getpid())
	f := &freezer{}
	switch {
	case fileExists("/sys/fs/cgroup/freezer/freezer.state") || dirExists("/sys/fs/cgroup/freezer"):
		f.dir, f.state = filepath.Join("/sys/fs/cgroup/freezer", name), "freezer.state"
	case fileExists("/sys/fs/cgroup/cgroup.controllers"):
		f.dir, f.state, f.v2 = filepath.Join("/sys/fs/cgroup", name), "cgroup.freeze", true
	default:
		return nil, errors.New("no cgroup freezer on this machine")
	}
	if err := os.Mkdir(f.dir, 0o755); err != nil {
		return nil, err
	}
	f.cmd = exec.Command("sleep", "3600")
	if err := f.cmd.Start(); err != nil {
		f.close()
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(f.dir, "cgroup.procs"), []byte(strconv.Itoa(f.cmd.Process.Pid)), 0o644); err != nil {
		f.close()
		return nil, err
	}
	return f, nil
}

// set freezes or thaws the cgroup and waits until the kernel says it is
// done.
func (f *freezer) set(frozen bool) error {
	val, want := "THAWED", "THAWED"
	if frozen {
		val, want = "FROZEN", "FROZEN"
	}
	if f.v2 {
		val = map[bool]string{true: "1", false: "0"}[frozen]
	}
	if err := os.WriteFile(filepath.Join(f.dir, f.state), []byte(val), 0o644); err != nil {
		return err
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if f.v2 {
			b, err := os.ReadFile(filepath.Join(f.dir, "cgroup.events"))
			if err != nil {
				return err
			}
			if strings.Contains(string(b), "frozen "+val) {
				return nil
			}
		} else {
			b, err := os.ReadFile(filepath.Join(f.dir, f.state))
			if err != nil {
				return err
			}
			if strings.TrimSpace(string(b)) == want {
				return nil
			}
		}
		time.Sleep(50 * time.Microsecond)
	}
	return errors.New("the freezer did not settle within 5 s")
}

func (f *freezer) close() {
	_ = f.set(false)
	if f.cmd != nil && f.cmd.Process != nil {
		_ = f.cmd.Process.Kill()
		_ = f.cmd.Wait()
	}
	_ = os.Remove(f.dir)
}

func fileExists(p string) bool { st, err := os.Stat(p); return err == nil && !st.IsDir() }
func dirExists(p string) bool  { st, err := os.Stat(p); return err == nil && st.IsDir() }
