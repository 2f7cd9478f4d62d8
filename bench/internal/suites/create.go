package suites

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// createAndEcho is R of the create suite: Create, then `echo ok` through
// bash -c (Commands.Run), as the floor does. It returns the sandbox so the
// caller kills it outside the timer.
func (e *Env) createAndEcho(ctx context.Context) (*rayito.Sandbox, error) {
	s, err := e.create(ctx)
	if err != nil {
		return nil, err
	}
	res, err := s.Commands.Run(ctx, "echo ok")
	if err == nil && res.Stdout != "ok\n" {
		err = fmt.Errorf("echo ok gave %q", res.Stdout)
	}
	return s, err
}

// PrebootedSuite is the name of the create suite's second result: the
// same measurement against a platform that keeps sandboxes pre-booted.
const PrebootedSuite = "create (pre-booted)"

// Create is create → first command (BENCHMARKS.md §2.1): n=30 sequential,
// then bursts of 10 concurrent creates, against the run's platform (which
// boots every sandbox on request). When the runner offers a platform with
// a pool of pre-booted sandboxes (Env.Prebooted), the same measurement
// against it is a second result, PrebootedSuite (added with
// Env.AddResult).
func Create(ctx context.Context, e *Env) harness.Result {
	r := e.createSuite(ctx, "create", nil)
	if e.Prebooted == nil {
		return r
	}
	pp, err := e.Prebooted(ctx)
	var pr harness.Result
	switch {
	case err != nil:
		pr = failed(PrebootedSuite, err)
	case pp.Unavailable != "":
		pr = harness.Result{Suite: PrebootedSuite, Unavailable: pp.Unavailable}
	default:
		pe := *e
		pe.Endpoint, pe.warm, pe.extra = pp.Endpoint, nil, nil
		pr = pe.createSuite(ctx, PrebootedSuite, pp)
		pr.Note += fmt.Sprintf("; a second in-process platform keeps %d sandboxes pre-booted (localvm.Options.Prebooted); before every R iteration and every burst, outside the timer, the harness waits until its pool is full again (the pool refills one sandbox at a time, 150 ms after the last create's run hook)", pp.N)
		if pp.N < 10 {
			pr.Note += fmt.Sprintf("; a burst of 10 takes the %d pooled sandboxes and boots the other %d on request", pp.N, 10-pp.N)
		}
		if r.R != nil && pr.R != nil {
			pr.Details = append(pr.Details, fmt.Sprintf("vs booted on request (suite create): R p50 %.1f → %.1f ms, p95 %.1f → %.1f ms", r.R.P50, pr.R.P50, r.R.P95, pr.R.P95))
		}
	}
	e.AddResult(pr)
	return r
}

// createSuite measures create → first command on e's platform and names
// the result suite. With pp, it waits (outside the timers) for pp's pool
// to be full before each R iteration and each burst.
func (e *Env) createSuite(ctx context.Context, suite string, pp *PrebootedPlatform) harness.Result {
	refill := func(ctx context.Context) error {
		if pp == nil {
			return nil
		}
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		if err := pp.WaitFull(wctx); err != nil {
			return fmt.Errorf("waiting for the pool to refill: %w", err)
		}
		return nil
	}
	n, warm := e.n(30), e.warmup(2)
	s, err := harness.Loop(ctx, warm, n,
		harness.Subject{Name: "F", Run: func(context.Context) (float64, error) {
			return timeIt(func() error {
				out, err := e.runFloor(floorCmd("bash", "-c", "echo ok"))
				if err == nil && string(out) != "ok\n" {
					err = fmt.Errorf("echo ok gave %q", out)
				}
				return err
			})
		}},
		harness.Subject{Name: "R", Run: func(ctx context.Context) (float64, error) {
			if err := refill(ctx); err != nil {
				return 0, err
			}
			var sbx *rayito.Sandbox
			d, err := timeIt(func() error {
				var err error
				sbx, err = e.createAndEcho(ctx)
				return err
			})
			// Outside the timer, and finished before the next iteration:
			// a teardown in the background would weigh on the next create.
			killAndWait(sbx)
			return d, err
		}},
	)
	if err != nil {
		return failed(suite, err)
	}
	r := harness.FromSamples(suite, "ms", false, s,
		"F = exec bash -c 'echo ok' "+nsNote()+"; R = rayito.Create + Commands.Run(\"echo ok\") (bash -c), Kill outside the timer and waited for (TERMINATED) before the next iteration; no create step for P")
	if e.Pin.Enabled() {
		r.Note += "; pinning: sandboxes of this suite are not re-pinned (they start with the harness's CPU-1 mask), F children start on CPU 0"
	}

	bursts := e.n(3)
	var walls []float64
	for b := 0; b < bursts; b++ {
		if err := refill(ctx); err != nil {
			r.Error = "burst: " + err.Error()
			break
		}
		wall, per, err := e.burst(ctx, 10)
		if err != nil {
			r.Error = "burst: " + err.Error()
			break
		}
		walls = append(walls, wall)
		ps := harness.Summarize(per)
		r.Details = append(r.Details, fmt.Sprintf("burst %d: 10 concurrent Create+echo ok, all answered after %.1f ms (each: min %.1f, p50 %.1f, max %.1f ms)", b+1, wall, ps.Min, ps.P50, ps.Max))
	}
	if bs := harness.Summarize(walls); bs != nil {
		r.SetMetric(harness.MetricBurstMs, bs.P50)
		if r.R != nil {
			r.Details = append(r.Details, fmt.Sprintf("burst wall p50 %.1f ms vs 2 × sequential p95 %.1f = %.1f ms", bs.P50, r.R.P95, 2*r.R.P95))
		}
	}
	return r
}

// burst creates k sandboxes concurrently, each running echo ok, and
// returns the wall time until all answered and each one's time. All are
// killed afterwards, outside the timer, and their teardown is waited for so
// that it does not weigh on the next burst.
func (e *Env) burst(ctx context.Context, k int) (wall float64, per []float64, err error) {
	sbxs := make([]*rayito.Sandbox, k)
	errs := make([]error, k)
	per = make([]float64, k)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sbxs[i], errs[i] = e.createAndEcho(ctx)
			per[i] = harness.Ms(time.Since(start))
		}()
	}
	wg.Wait()
	wall = harness.Ms(time.Since(start))
	killAndWait(sbxs...)
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		return wall, per, fmt.Errorf("%d of %d failed: %w", len(msgs), k, errors.New(strings.Join(msgs, "; ")))
	}
	return wall, per, nil
}
