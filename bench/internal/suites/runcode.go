package suites

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	_ "embed"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// jupyterFloor is the script of the "F jupyter" floor: jupyter_client
// against a stock ipykernel.
//
//go:embed jupyter_floor.py
var jupyterFloor string

// CodeStreamSuite is the runcode suite's second result: 3 MB of prints
// from one cell.
const CodeStreamSuite = "runcode stream"

// codeStreamCell writes 3 000 lines of 1000 bytes (3 MB) to stdout.
const codeStreamCell = "import sys\nline = 'x' * 999 + '\\n'\nfor _ in range(3000):\n    sys.stdout.write(line)\n"

// codeStreamBytes is what codeStreamCell prints.
const codeStreamBytes = 3000 * 1000

// RunCode is run_code 1+1 on a warm context (BENCHMARKS.md §2.7): R =
// Sandbox.RunCode("1+1") until the end event, against F = a warm Python
// evaluating the same line over pipes, n=100, and a second floor, "F
// jupyter": the same cell executed by jupyter_client (the reference
// Python client) against a stock local ipykernel, until its reply and its
// idle status. The first cell (the kernel's start) is timed once, outside
// the loop (metric first_cell_ms). A second result, CodeStreamSuite, is
// the throughput of one cell printing 3 MB.
func RunCode(ctx context.Context, e *Env) harness.Result {
	sbx, err := e.Warm(ctx)
	if err != nil {
		return failed("runcode", fmt.Errorf("warm sandbox: %w", err))
	}
	first, err := timeIt(func() error {
		ex, err := sbx.RunCode(ctx, "1+1")
		if err == nil && ex.Text() != "2" {
			err = fmt.Errorf("1+1 gave %q", ex.Text())
		}
		return err
	})
	if err != nil {
		return harness.Result{Suite: "runcode", Unavailable: "not available: " + err.Error()}
	}
	py, err := newWarmPython(warmEval)
	if err != nil {
		return failed("runcode", fmt.Errorf("floor: %w", err))
	}
	defer py.close()
	jc, jupyterErr := newWarmPython(jupyterFloor)
	if jupyterErr == nil {
		defer jc.close()
		// The kernel's start and a first cell, outside the loop.
		jupyterErr = jc.eval("1+1", "2")
	}
	subjects := []harness.Subject{
		{Name: "F", Run: func(context.Context) (float64, error) {
			return timeIt(func() error { return py.eval("1+1", "2") })
		}},
		{Name: "F jupyter", Optional: true, Run: func(context.Context) (float64, error) {
			if jupyterErr != nil {
				return 0, jupyterErr
			}
			return timeIt(func() error { return jc.eval("1+1", "2") })
		}},
		{Name: "R", Run: func(ctx context.Context) (float64, error) {
			return timeIt(func() error {
				ex, err := sbx.RunCode(ctx, "1+1")
				if err == nil && ex.Text() != "2" {
					err = fmt.Errorf("1+1 gave %q", ex.Text())
				}
				return err
			})
		}},
	}
	s, err := harness.Loop(ctx, e.warmup(5), e.n(100), subjects...)
	if err != nil {
		return failed("runcode", err)
	}
	r := harness.FromSamples("runcode", "ms", false, s,
		"F = a warm python3 evaluating 1+1 over pipes (one line in, one out); R = Sandbox.RunCode(\"1+1\") on the default context, warm, until its end event")
	r.Details = append(r.Details, fmt.Sprintf("first cell of the sandbox (the kernel starts: rayd's default, -kernel-start lazy): %.0f ms", first))
	r.Metrics = map[string]float64{harness.MetricFirstCellMs: first}
	if jupyterErr != nil {
		r.Note += "; F jupyter not measured: " + jupyterErr.Error()
	}
	e.AddResult(codeStream(ctx, e, sbx))
	return r
}

// codeStream is CodeStreamSuite: R = RunCode(codeStreamCell) until its
// end event, all 3 MB received, against F = a warm Python running the
// same loop into a pipe the harness reads, n=10.
func codeStream(ctx context.Context, e *Env, sbx *rayito.Sandbox) harness.Result {
	py, err := newWarmPython(warmWrite)
	if err != nil {
		return failed(CodeStreamSuite, fmt.Errorf("floor: %w", err))
	}
	defer py.close()
	subjects := []harness.Subject{
		{Name: "F", Run: func(context.Context) (float64, error) {
			t := time.Now()
			if _, err := io.WriteString(py.in, "go\n"); err != nil {
				return 0, err
			}
			n, err := io.CopyN(io.Discard, py.out, codeStreamBytes)
			return harness.MBps(n, time.Since(t)), err
		}},
		{Name: "R", Run: func(ctx context.Context) (float64, error) {
			t := time.Now()
			ex, err := sbx.RunCode(ctx, codeStreamCell)
			if err != nil {
				return 0, err
			}
			n := 0
			for _, s := range ex.Logs.Stdout {
				n += len(s)
			}
			if n != codeStreamBytes || ex.Error != nil {
				return 0, fmt.Errorf("got %d bytes of stdout (error %v), want %d", n, ex.Error, codeStreamBytes)
			}
			return harness.MBps(int64(n), time.Since(t)), nil
		}},
	}
	s, err := harness.Loop(ctx, e.warmup(2), e.n(10), subjects...)
	if err != nil {
		return failed(CodeStreamSuite, err)
	}
	return harness.FromSamples(CodeStreamSuite, "MB/s", true, s,
		"R = Sandbox.RunCode of a cell writing 3 000 lines of 1000 bytes to sys.stdout, until its end event with all 3 MB received; F = a warm python3 running the same loop into a pipe the harness reads")
}

// Scripts of warmPython.
const (
	// warmEval prints the repr of each line it evaluates.
	warmEval = "import sys\nfor l in sys.stdin:\n    print(repr(eval(l)), flush=True)"
	// warmWrite writes codeStreamCell's 3 MB for each line it reads.
	warmWrite = "import sys\nline = 'x' * 999 + '\\n'\nfor l in sys.stdin:\n    for _ in range(3000):\n        sys.stdout.write(line)\n    sys.stdout.flush()"
)

// warmPython is a python3 running a script that answers each line of its
// stdin on its stdout.
type warmPython struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func newWarmPython(script string) (*warmPython, error) {
	cmd := exec.Command("/usr/bin/python3", "-c", script)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &warmPython{cmd: cmd, in: in, out: bufio.NewReader(out)}, nil
}

func (p *warmPython) eval(expr, want string) error {
	if _, err := io.WriteString(p.in, expr+"\n"); err != nil {
		return err
	}
	line, err := p.out.ReadString('\n')
	if err != nil {
		return err
	}
	if got := strings.TrimSpace(line); got != want {
		return fmt.Errorf("%s gave %q", expr, got)
	}
	return nil
}

func (p *warmPython) close() {
	_ = p.in.Close()
	_ = p.cmd.Wait()
}
