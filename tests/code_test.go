package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// needKernel skips when the machine has no ipykernel (make deps installs
// python3-ipykernel as root).
func needKernel(t *testing.T) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import ipykernel").Run(); err != nil {
		t.Skip("python3-ipykernel is not installed (make deps installs it as root)")
	}
}

// The SDK's RunCode through the local platform: state persists across
// cells, prints and results, an exception, a matplotlib PNG, contexts
// isolated from each other.
func TestRunCode(t *testing.T) {
	needKernel(t)
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbx := p.create(ctx)
	defer sbx.Kill(context.Background())

	if _, err := sbx.RunCode(ctx, "x = 21"); err != nil {
		t.Fatal(err)
	}
	ex, err := sbx.RunCode(ctx, "x*2")
	if err != nil || ex.Text() != "42" {
		t.Fatalf("x*2: %+v %v", ex, err)
	}
	var printed bytes.Buffer
	ex, err = sbx.RunCode(ctx, "print('hello'); x", rayito.OnStdout(func(b []byte) { printed.Write(b) }))
	if err != nil || ex.Text() != "21" || printed.String() != "hello\n" || strings.Join(ex.Logs.Stdout, "") != "hello\n" {
		t.Fatalf("print and result: %+v %q %v", ex, printed.String(), err)
	}
	ex, err = sbx.RunCode(ctx, "1/0")
	if err != nil || ex.Error == nil || ex.Error.Name != "ZeroDivisionError" || !strings.Contains(ex.Error.Traceback, "division by zero") {
		t.Fatalf("1/0: %+v %v", ex, err)
	}
	ex, err = sbx.RunCode(ctx, "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot as plt; plt.plot([1, 2]); plt.show()")
	if err != nil || len(ex.PNGs()) != 1 || !bytes.HasPrefix(ex.PNGs()[0], []byte("\x89PNG")) {
		t.Fatalf("matplotlib: %+v %v", ex, err)
	}
	other, err := sbx.Code.CreateContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ex, err = sbx.RunCode(ctx, "x", rayito.InContext(other.ID))
	if err != nil || ex.Error == nil || ex.Error.Name != "NameError" {
		t.Fatalf("x in another context: %+v %v", ex, err)
	}
	if err := sbx.Code.RemoveContext(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	var re *rayito.RPCError
	if err := sbx.Code.RemoveContext(ctx, "default-python"); !errors.As(err, &re) || re.Code != rayito.CodeFailedPrecondition {
		t.Fatalf("removing the default context: %v", err)
	}
	ex, err = sbx.RunCode(ctx, "import time; time.sleep(30)", rayito.WithTimeout(500*time.Millisecond))
	if err != nil || !ex.TimedOut {
		t.Fatalf("timeout: %+v %v", ex, err)
	}
	// The context lives on after the interrupt.
	if ex, err := sbx.RunCode(ctx, "x+1"); err != nil || ex.Text() != "22" {
		t.Fatalf("after the timeout: %+v %v", ex, err)
	}
}

// `rayito run --code` prints the value of the cell.
func TestCLIRunCode(t *testing.T) {
	needKernel(t)
	if r := runCLI(t, cliEnv(t), "run", "--code", "print(6*7)"); r.code != 0 || r.stdout != "42\n" {
		t.Fatalf("run --code: %+v", r)
	}
	if r := runCLIInput(t, cliEnv(t), "1/0\n", "run", "--code", "-"); r.code != 1 || !strings.Contains(r.stderr, "ZeroDivisionError") {
		t.Fatalf("run --code - with an exception: %+v", r)
	}
}

// TestRunCodeReattachAfterDrop: every connection to the platform is cut
// while a cell prints; RunCode reattaches and returns every line once, in
// order, and the cell's result (rayd kept it running). Cancelling the
// context interrupts the cell: the next one does not wait for it.
func TestRunCodeReattachAfterDrop(t *testing.T) {
	needKernel(t)
	p := startPlatform(t, "")
	defer p.stop(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sbx := p.create(ctx)
	defer sbx.Kill(context.Background())
	if _, err := sbx.RunCode(ctx, "1"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen strings.Builder
	cutOnce := sync.OnceFunc(func() {
		if n := p.conns.cut(); n == 0 {
			t.Error("no connection to cut")
		}
	})
	ex, err := sbx.RunCode(ctx, "import time\nfor i in range(40):\n    print(i, flush=True)\n    time.sleep(0.05)\n'done'",
		rayito.OnStdout(func(b []byte) {
			mu.Lock()
			seen.Write(b)
			n := strings.Count(seen.String(), "\n")
			mu.Unlock()
			if n >= 5 {
				go cutOnce()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i := range 40 {
		fmt.Fprintf(&want, "%d\n", i)
	}
	if got := strings.Join(ex.Logs.Stdout, ""); got != want.String() || seen.String() != want.String() {
		t.Fatalf("after the cut: stdout %q, callbacks %q", got, seen.String())
	}
	if ex.Text() != "'done'" || ex.Error != nil {
		t.Fatalf("after the cut: result %q, error %v", ex.Text(), ex.Error)
	}

	cctx, ccancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = sbx.RunCode(cctx, "import time\ntime.sleep(60)")
	ccancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled cell: %v", err)
	}
	start := time.Now()
	if ex, err := sbx.RunCode(ctx, "'after'"); err != nil || ex.Text() != "'after'" || time.Since(start) > 10*time.Second {
		t.Fatalf("after a cancel: %v %v in %v", ex, err, time.Since(start))
	}
}
