package suites

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strconv"
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
// the loop, from Create to the cell's answer, on the run's platform
// (metric first_cell_ms) and, when the runner offers one, on a platform
// with a full pool of pre-booted sandboxes (first_cell_pooled_ms). A
// second result, CodeStreamSuite, is
// the throughput of one cell printing 3 MB.
func RunCode(ctx context.Context, e *Env) harness.Result {
	sbx, err := e.Warm(ctx)
	if err != nil {
		return failed("runcode", fmt.Errorf("warm sandbox: %w", err))
	}
	if _, err := sbx.RunCode(ctx, "1+1"); err != nil {
		return harness.Result{Suite: "runcode", Unavailable: "not available: " + err.Error()}
	}
	first, firstErr := e.firstCell(ctx, nil)
	var pooled float64
	var pooledNote string
	if e.Prebooted != nil {
		pp, err := e.Prebooted(ctx)
		switch {
		case err != nil:
			pooledNote = err.Error()
		case pp.Unavailable != "":
			pooledNote = pp.Unavailable
		default:
			pooled, err = e.firstCell(ctx, pp)
			if err != nil {
				pooledNote = err.Error()
			}
		}
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
		jupyterErr = jc.eval(jupyterCell("1+1"), "2\t0")
	}
	subjects := []harness.Subject{
		{Name: "F", Run: func(context.Context) (float64, error) {
			return timeIt(func() error { return py.eval("1+1", "2") })
		}},
		{Name: "F jupyter", Optional: true, Run: func(context.Context) (float64, error) {
			if jupyterErr != nil {
				return 0, jupyterErr
			}
			return timeIt(func() error { return jc.eval(jupyterCell("1+1"), "2\t0") })
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
	r.Metrics = map[string]float64{}
	if firstErr != nil {
		r.Details = append(r.Details, "create → first cell: "+firstErr.Error())
	} else {
		r.Metrics[harness.MetricFirstCellMs] = first
		r.Details = append(r.Details, fmt.Sprintf("create → first cell 1+1 (-kernel-start %s, booted on request): %.0f ms", e.KernelStart, first))
	}
	switch {
	case pooled > 0:
		r.Metrics[harness.MetricFirstCellPooledMs] = pooled
		r.Details = append(r.Details, fmt.Sprintf("create → first cell 1+1 (-kernel-start %s, pre-booted sandbox from a full pool): %.0f ms", e.KernelStart, pooled))
	case pooledNote != "":
		r.Details = append(r.Details, "create → first cell from the pool: "+pooledNote)
	}
	if jupyterErr != nil {
		r.Note += "; F jupyter not measured: " + jupyterErr.Error()
	}
	e.AddResult(codeStream(ctx, e, sbx, jc, jupyterErr))
	return r
}

// jupyterCell is a cell as jupyter_floor.py reads it: a JSON string.
func jupyterCell(code string) string {
	b, _ := json.Marshal(code)
	return string(b)
}

// firstCell times Create → the first RunCode("1+1") answered, on e's
// platform or, with pp, on the pre-booted one once its pool is full.
func (e *Env) firstCell(ctx context.Context, pp *PrebootedPlatform) (float64, error) {
	pe := *e
	if pp != nil {
		pe.Endpoint = pp.Endpoint
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := pp.WaitFull(wctx); err != nil {
			return 0, fmt.Errorf("waiting for the pool: %w", err)
		}
	}
	var sbx *rayito.Sandbox
	d, err := timeIt(func() error {
		var err error
		if sbx, err = pe.create(ctx); err != nil {
			return err
		}
		ex, err := sbx.RunCode(ctx, "1+1")
		if err == nil && ex.Text() != "2" {
			err = fmt.Errorf("1+1 gave %q", ex.Text())
		}
		return err
	})
	if sbx != nil {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		_ = sbx.Kill(kctx)
		cancel()
	}
	return d, err
}

// codeStream is CodeStreamSuite: R = RunCode(codeStreamCell) until its
// end event, all 3 MB received, against F = a warm Python running the
// same loop into a pipe the harness reads, and "F jupyter" = the cell run
// by jupyter_client against a stock ipykernel (jc, when it started), n=10.
func codeStream(ctx context.Context, e *Env, sbx *rayito.Sandbox, jc *warmPython, jupyterErr error) harness.Result {
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
		{Name: "F jupyter", Optional: true, Run: func(context.Context) (float64, error) {
			if jupyterErr != nil {
				return 0, jupyterErr
			}
			t := time.Now()
			err := jc.eval(jupyterCell(codeStreamCell), "\t"+strconv.Itoa(codeStreamBytes))
			return harness.MBps(codeStreamBytes, time.Since(t)), err
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
			if ex.Error != nil {
				return 0, fmt.Errorf("the cell failed: %w", ex.Error)
			}
			if n != codeStreamBytes {
				return 0, fmt.Errorf("got %d bytes of stdout, want %d", n, codeStreamBytes)
			}
			return harness.MBps(int64(n), time.Since(t)), nil
		}},
	}
	s, err := harness.Loop(ctx, e.warmup(2), e.n(10), subjects...)
	if err != nil {
		return failed(CodeStreamSuite, err)
	}
	return harness.FromSamples(CodeStreamSuite, "MB/s", true, s,
		"R = Sandbox.RunCode of a cell writing 3 000 lines of 1000 bytes to sys.stdout, until its end event with all 3 MB received; F = a warm python3 running the same loop into a pipe the harness reads; F jupyter = jupyter_client running the cell against a stock ipykernel, until idle")
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
	if got := strings.TrimRight(line, "\n"); got != want {
		return fmt.Errorf("%s gave %q", expr, got)
	}
	return nil
}

func (p *warmPython) close() {
	_ = p.in.Close()
	_ = p.cmd.Wait()
}
