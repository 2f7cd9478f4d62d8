package jupyter

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/rayd/internal/proc"
)

// startTestKernel starts a real ipykernel as rayd's own user, or skips.
func startTestKernel(t *testing.T, sup *proc.Supervisor) *Kernel {
	t.Helper()
	py := "/usr/bin/python3"
	p, err := sup.Start(proc.Spec{Path: py, Args: []string{py, "-c", "import ipykernel_launcher"}, Env: []string{}, Dir: "/"})
	if err != nil {
		t.Skip("no /usr/bin/python3")
	}
	<-p.Done()
	if x, _ := p.Exit(); x.ExitCode != 0 {
		t.Skip("no ipykernel for /usr/bin/python3 (install python3-ipykernel: make deps as root)")
	}
	k, err := Start(context.Background(), Options{
		Supervisor: sup,
		BaseDir:    t.TempDir(),
		Spec: func(cf string) (proc.Spec, error) {
			return proc.Spec{Path: py, Args: []string{py, "-m", "ipykernel_launcher", "-f", cf}, Env: []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}, Dir: "/"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestKernelLifecycleLeavesNothing: a kernel starts, runs a cell, is
// interrupted, and Close leaves no process, directory or goroutine.
func TestKernelLifecycleLeavesNothing(t *testing.T) {
	sup, err := proc.New(proc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Shutdown(context.Background(), time.Second)
	before := runtime.NumGoroutine()
	k := startTestKernel(t, sup)
	var outs []Output
	out, err := k.Execute(context.Background(), "print(6*7)", false, func(o Output) { outs = append(outs, o) })
	if err != nil || out.Status != "ok" || len(outs) < 2 || outs[1].Text != "42\n" {
		t.Fatalf("execute: %+v %+v %v", out, outs, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	out, err = k.Execute(ctx, "import time\ntime.sleep(30)", false, func(Output) {})
	cancel()
	if err != nil || !out.Interrupted || out.Stuck || out.Status != "error" {
		t.Fatalf("interrupt: %+v %v", out, err)
	}
	dir, pid := k.Dir(), k.Pid()
	k.Close()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir left: %v", err)
	}
	if _, err := sup.Get(pid); err == nil {
		if p, _ := sup.Get(pid); p != nil {
			if _, ended := p.Exit(); !ended {
				t.Error("kernel still running")
			}
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines left (before %d):\n%s", n-before, before, buf[:runtime.Stack(buf, true)])
	}
}

// TestCellAfterErrorRuns: the cell right after one that raised runs and
// prints (with stop_on_error, ipykernel aborted a request that arrived in
// a window after the error, which a loaded machine hit now and then).
func TestCellAfterErrorRuns(t *testing.T) {
	sup, err := proc.New(proc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Shutdown(context.Background(), time.Second)
	k := startTestKernel(t, sup)
	defer k.Close()
	ctx := context.Background()
	for i := range 30 {
		if out, err := k.Execute(ctx, "1/0", false, func(Output) {}); err != nil || out.Status != "error" {
			t.Fatalf("error cell %d: %+v %v", i, out, err)
		}
		var text string
		out, err := k.Execute(ctx, "print('after')", false, func(o Output) { text += o.Text })
		if err != nil || out.Status != "ok" || text != "after\n" {
			t.Fatalf("cell %d after an error: status %q, output %q, %v", i, out.Status, text, err)
		}
	}
}
