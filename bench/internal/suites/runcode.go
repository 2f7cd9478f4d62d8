package suites

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"

	"github.com/rayito-dev/rayito/bench/internal/harness"
)

// RunCode is run_code 1+1 on a warm context (BENCHMARKS.md §2.7): R =
// Sandbox.RunCode("1+1") until the end event, against F = a warm Python
// evaluating the same line over pipes, n=100. The first cell (the kernel's
// start) is timed once, outside the loop.
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
	py, err := newWarmPython()
	if err != nil {
		return failed("runcode", fmt.Errorf("floor: %w", err))
	}
	defer py.close()
	subjects := []harness.Subject{
		{Name: "F", Run: func(context.Context) (float64, error) {
			return timeIt(func() error { return py.eval("1+1", "2") })
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
	return r
}

// warmPython is a python3 reading lines to evaluate on stdin and printing
// their repr.
type warmPython struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func newWarmPython() (*warmPython, error) {
	cmd := exec.Command("/usr/bin/python3", "-u", "-c", "import sys\nfor l in sys.stdin:\n    print(repr(eval(l)), flush=True)")
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
