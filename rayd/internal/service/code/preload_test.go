package code_test

import (
	"os"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/runpayload"
	"github.com/rayito-dev/rayito/rayd/internal/daemon"
	"github.com/rayito-dev/rayito/rayd/internal/daemon/daemontest"
	"github.com/rayito-dev/rayito/rayd/internal/proc"
	"github.com/rayito-dev/rayito/rayd/internal/raydtest"
)

// preloadPid returns the pid of the preloaded interpreter, or 0.
func preloadPid(h *daemontest.Harness) int {
	for _, p := range h.Daemon.Supervisor.List() {
		if _, ended := p.Exit(); !ended && p.Spec().Tag == "rayd:kernel-preload" {
			return p.Pid()
		}
	}
	return 0
}

// waitPreload waits until /ready would pass (the preload has loaded).
func waitPreload(t *testing.T, h *daemontest.Harness) time.Duration {
	t.Helper()
	start := time.Now()
	for !h.Daemon.Code.PreloadDone() {
		if time.Since(start) > 60*time.Second {
			t.Fatal("the preload never finished")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// TestCodePreload: with -kernel-start preload an interpreter loads
// ipykernel at boot (/ready waits for it), and after /run it becomes the
// default kernel: with the payload's environment and working directory,
// a fresh key, random reseeded, debugpy and jedi importable; the first
// cell skips the imports.
func TestCodePreload(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.NewWith(t, func(c *daemon.Config) { c.PreloadKernel = true })
	loaded := waitPreload(t, h)
	if out := h.Hook("ready", nil); out["outcome"] == "kernel_warming" {
		t.Fatalf("/ready after the preload: %v", out)
	}
	pid := preloadPid(h)
	if pid == 0 {
		t.Fatal("no preloaded interpreter")
	}
	// A directory the sandbox user can enter (t.TempDir's parent is 0700).
	dir, err := os.MkdirTemp("", "rayd-preload-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h.Run(func(p *runpayload.Payload) {
		p.Envs = map[string]string{"RAYITO_PRELOAD_TEST": "from-payload"}
		p.Workdir = dir
	})
	start := time.Now()
	c := execCell(h, nil, "import os; (os.environ.get('RAYITO_PRELOAD_TEST'), os.getcwd())", 0)
	first := time.Since(start)
	if want := "('from-payload', '" + dir + "')"; c.main().GetText() != want {
		t.Fatalf("env and cwd: %q, want %q (events %v, error %v)", c.main().GetText(), want, c.kinds, c.err)
	}
	ks := h.Daemon.Code.Kernels()
	if len(ks) != 1 || ks[0].Pid != pid {
		t.Fatalf("kernels %+v, the preloaded interpreter was %d", ks, pid)
	}
	if c := execCell(h, nil, "import importlib.util as u\n[m for m in ('debugpy', 'jedi') if u.find_spec(m) and not __import__(m)]", 0); c.main().GetText() != "[]" || c.err != nil {
		t.Fatalf("debugpy/jedi: %v %v", c.main().GetText(), c.err)
	}
	t.Logf("preload loaded in %v; first cell after /run %v", loaded, first)
}

// TestCodePreloadMisfit: a payload that changes what Python reads at
// startup (PYTHONPATH) makes rayd discard the preload (it exits) and
// start the kernel from scratch, which sees the variable.
func TestCodePreloadMisfit(t *testing.T) {
	raydtest.RequireIPyKernel(t)
	h := daemontest.NewWith(t, func(c *daemon.Config) { c.PreloadKernel = true })
	waitPreload(t, h)
	pid := preloadPid(h)
	if pid == 0 {
		t.Fatal("no preloaded interpreter")
	}
	h.Run(func(p *runpayload.Payload) { p.Envs = map[string]string{"PYTHONPATH": "/rayito-preload-test"} })
	c := execCell(h, nil, "import sys; '/rayito-preload-test' in sys.path", 0)
	if c.main().GetText() != "True" {
		t.Fatalf("PYTHONPATH not applied: %v %v", c.main().GetText(), c.err)
	}
	if ks := h.Daemon.Code.Kernels(); len(ks) != 1 || ks[0].Pid == pid {
		t.Fatalf("kernels %+v: the misfit preload %d was used", ks, pid)
	}
	p, err := h.Daemon.Supervisor.Get(pid)
	if err != nil {
		return // reaped and forgotten
	}
	select {
	case <-p.Done():
		if x, _ := p.Exit(); x.Status != proc.StatusExited || x.ExitCode != 0 {
			t.Errorf("the discarded preload ended %+v", x)
		}
	case <-time.After(10 * time.Second):
		t.Error("the discarded preload still runs")
	}
}
