package suites

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// densitySteps are the ramp levels of BENCHMARKS.md §2.8.
var densitySteps = []int{10, 25, 50, 100, 150, 200}

// densityLevels returns the levels up to max (max itself included).
func densityLevels(max int) []int {
	var out []int
	for _, l := range densitySteps {
		if l < max {
			out = append(out, l)
		}
	}
	if max > 0 {
		out = append(out, max)
	}
	return out
}

// level is one step of a ramp.
type level struct {
	count     int
	stepWall  time.Duration
	startMs   []float64 // per item created in this step
	execP50   float64
	execP95   float64
	availMB   float64
	dropPerMB float64 // MemAvailable drop since the start, per item
	fails     []error // failed creates in this step (retried)
	resampled bool    // exec was re-measured after a first p95 over 2 × base
}

func (l level) rate() float64 {
	if l.stepWall <= 0 {
		return 0
	}
	return float64(len(l.startMs)) / l.stepWall.Seconds()
}

const mb = 1e6

// densitySettle is the pause after each ramp step, before exec and
// MemAvailable are measured (not part of the creation rate).
const densitySettle = time.Second

// spawnParallel runs create over w goroutines until k calls succeeded or
// more than maxFail failed, and returns each successful call's duration in
// ms and the failures. err is set when it gave up (too many failures or the
// context ended).
func spawnParallel(ctx context.Context, k, w, maxFail int, create func(ctx context.Context) error) (times []float64, fails []error, err error) {
	var (
		mu       sync.Mutex
		inFlight int
		wg       sync.WaitGroup
	)
	for g := 0; g < min(w, k); g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if len(times)+inFlight >= k || len(fails) > maxFail || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				inFlight++
				mu.Unlock()
				t := time.Now()
				err := create(ctx)
				d := harness.Ms(time.Since(t))
				mu.Lock()
				inFlight--
				if err != nil {
					fails = append(fails, err)
				} else {
					times = append(times, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	switch {
	case ctx.Err() != nil:
		err = ctx.Err()
	case len(fails) > maxFail:
		err = fmt.Errorf("%d creates failed (last: %w)", len(fails), fails[len(fails)-1])
	}
	return times, fails, err
}

// execSample times n runs of fn and returns p50 and p95.
func execSample(ctx context.Context, n int, fn func(ctx context.Context) error) (p50, p95 float64, err error) {
	xs := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		d, err := timeIt(func() error { return fn(ctx) })
		if err != nil {
			return 0, 0, err
		}
		xs = append(xs, d)
	}
	s := harness.Summarize(xs)
	return s.P50, s.P95, nil
}

func (e *Env) availMB() (avail, total float64, err error) {
	t, a, err := e.Proc.MemInfo()
	return float64(a) / mb, float64(t) / mb, err
}

// Density ramps idle sandboxes (BENCHMARKS.md §2.8) and, first, the same
// ramp of namespaced `sleep infinity` processes as the floor.
func Density(ctx context.Context, e *Env) harness.Result {
	levels := densityLevels(e.DensityMax)
	if len(levels) == 0 {
		return failed("density", errors.New("-density-max must be > 0"))
	}
	workers := max(1, min(e.DensityWorkers, 4))
	// Not capped by -iterations: its p95 is the stop criterion, and a p95
	// of 5 samples is just their maximum.
	const execN = 20
	r := harness.Result{Suite: "density", Unit: "ms",
		Note: fmt.Sprintf("ramp %v with %d concurrent creators; F = namespaced (%s) `sleep infinity` processes, R = idle sandboxes via rayito.Create; the F/R columns are the time to start one item during the ramp; at each level exec p50/p95 of n=%d `echo hi` (not capped by -iterations) (F: fork/exec /bin/echo, R: Commands.Exec on one extra warm sandbox) and MemAvailable, R after a 1 s settle; stop when exec p95 > 2 × level %d or MemAvailable < 20 %% of MemTotal",
			levels, workers, nsNote(), execN, levels[0])}
	r.SetMetric(harness.MetricDensityMax, float64(levels[len(levels)-1]))

	fl, ferr := e.floorRamp(ctx, levels, workers, execN)
	var fstarts []float64
	for _, l := range fl {
		fstarts = append(fstarts, l.startMs...)
		r.Details = append(r.Details, fmt.Sprintf("F %3d: start p95 %.2f ms, %.0f/s; exec p50 %.2f p95 %.2f ms; MemAvailable %.0f MB (%.3f MB drop per process)",
			l.count, harness.Percentile(sorted(l.startMs), 95), l.rate(), l.execP50, l.execP95, l.availMB, l.dropPerMB))
	}
	r.F = harness.Summarize(fstarts)
	if ferr != nil {
		r.Details = append(r.Details, "F error: "+ferr.Error())
	}

	rl, stop, rerr := e.sandboxRamp(ctx, levels, workers, execN)
	var rstarts []float64
	reached, rateMin, failures := 0, 0.0, 0
	for i, l := range rl {
		rstarts = append(rstarts, l.startMs...)
		again := ""
		if l.resampled {
			again = " (second sample; the first had p95 > 2 × level " + fmt.Sprint(levels[0]) + ")"
		}
		r.Details = append(r.Details, fmt.Sprintf("R %3d: create p95 %.1f ms, %.1f/s; exec p50 %.2f p95 %.2f ms%s; MemAvailable %.0f MB (%.2f MB drop per sandbox)",
			l.count, harness.Percentile(sorted(l.startMs), 95), l.rate(), l.execP50, l.execP95, again, l.availMB, l.dropPerMB))
		if stop == "" || i < len(rl)-1 {
			reached = l.count
		}
		if i == 0 || l.rate() < rateMin {
			rateMin = l.rate()
		}
		for _, f := range l.fails {
			failures++
			r.Details = append(r.Details, fmt.Sprintf("R %3d: a create failed and was retried: %v", l.count, f))
		}
	}
	r.R = harness.Summarize(rstarts)
	if len(rl) > 0 {
		r.SetMetric(harness.MetricDensityReached, float64(reached))
		r.SetMetric(harness.MetricDensityRateMin, rateMin)
		r.SetMetric("density_create_failures", float64(failures))
	}
	if stop != "" {
		r.Details = append(r.Details, "R stopped: "+stop)
	}
	if rerr != nil {
		r.Error = rerr.Error()
	}
	r.Finish()
	return r
}

func sorted(xs []float64) []float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s
}

// floorRamp starts namespaced sleeps level by level and kills them all at
// the end.
func (e *Env) floorRamp(ctx context.Context, levels []int, workers, execN int) ([]level, error) {
	var (
		mu    sync.Mutex
		procs []*exec.Cmd
	)
	defer func() {
		for _, c := range procs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	avail0, _, err := e.availMB()
	if err != nil {
		return nil, err
	}
	var out []level
	for _, target := range levels {
		e.progress("density F: %d processes", target)
		k := target - len(procs)
		t := time.Now()
		times, fails, err := spawnParallel(ctx, k, workers, 0, func(context.Context) error {
			cmd := floorCmd("sleep", "infinity")
			if cmd.SysProcAttr == nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{}
			}
			cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
			if err := e.Pin.Start(cmd); err != nil {
				return err
			}
			mu.Lock()
			procs = append(procs, cmd)
			mu.Unlock()
			return nil
		})
		l := level{count: len(procs), stepWall: time.Since(t), startMs: times}
		if err != nil {
			return out, err
		}
		_ = fails // maxFail 0: any failure is err
		if l.execP50, l.execP95, err = execSample(ctx, execN, func(context.Context) error {
			_, err := e.runFloor(floorCmdPlain("/bin/echo", "hi"))
			return err
		}); err != nil {
			return out, err
		}
		if l.availMB, _, err = e.availMB(); err != nil {
			return out, err
		}
		l.dropPerMB = (avail0 - l.availMB) / float64(l.count)
		out = append(out, l)
	}
	return out, nil
}

// sandboxRamp creates idle sandboxes level by level, measuring exec on one
// extra warm sandbox; it kills them all at the end. stop says why it
// stopped early ("" when it reached the last level).
func (e *Env) sandboxRamp(ctx context.Context, levels []int, workers, execN int) (out []level, stop string, err error) {
	var (
		mu   sync.Mutex
		sbxs []*rayito.Sandbox
	)
	defer func() {
		e.progress("density R: killing %d sandboxes", len(sbxs))
		killParallel(sbxs, 4)
	}()
	probe, err := e.create(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("probe sandbox: %w", err)
	}
	defer kill(probe)
	if err := e.pinSandboxes(probe); err != nil {
		return nil, "", err
	}
	execProbe := func(ctx context.Context) error {
		res, err := probe.Commands.Exec(ctx, []string{"echo", "hi"})
		if err == nil && res.Stdout != "hi\n" {
			err = fmt.Errorf("echo gave %q", res.Stdout)
		}
		return err
	}
	if _, _, err := execSample(ctx, 5, execProbe); err != nil {
		return nil, "", err
	}
	avail0, total, err := e.availMB()
	if err != nil {
		return nil, "", err
	}
	base := 0.0
	for _, target := range levels {
		e.progress("density R: %d sandboxes", target)
		k := target - len(sbxs)
		before := len(sbxs)
		t := time.Now()
		// Tolerate a few failed creates per step (10 %, at least 2): they
		// are reported, and the step retries until the level is full.
		times, fails, cerr := spawnParallel(ctx, k, workers, max(2, k/10), func(ctx context.Context) error {
			s, err := e.create(ctx)
			if err != nil {
				return err
			}
			mu.Lock()
			sbxs = append(sbxs, s)
			mu.Unlock()
			return nil
		})
		l := level{count: len(sbxs), stepWall: time.Since(t), startMs: times, fails: fails}
		if cerr != nil {
			return out, "", fmt.Errorf("create at level %d (have %d): %w", target, len(sbxs), cerr)
		}
		if err := e.pinSandboxes(sbxs[before:]...); err != nil {
			return out, "", err
		}
		// Let the new sandboxes finish starting up: the level measures
		// idle ones.
		select {
		case <-time.After(densitySettle):
		case <-ctx.Done():
			return out, "", ctx.Err()
		}
		if l.execP50, l.execP95, err = execSample(ctx, execN, execProbe); err != nil {
			return out, "", err
		}
		if l.availMB, _, err = e.availMB(); err != nil {
			return out, "", err
		}
		l.dropPerMB = (avail0 - l.availMB) / float64(l.count)
		out = append(out, l)
		if base == 0 {
			base = l.execP95
		}
		if l.execP95 > 2*base {
			// Confirm with a second sample before stopping: one noisy
			// sample on a shared 2-core box should not end the ramp.
			p50, p95, err := execSample(ctx, execN, execProbe)
			if err != nil {
				return out, "", err
			}
			out[len(out)-1].execP50, out[len(out)-1].execP95 = p50, p95
			out[len(out)-1].resampled = true
			l = out[len(out)-1]
		}
		switch {
		case l.execP95 > 2*base:
			return out, fmt.Sprintf("exec p95 %.2f ms at %d sandboxes > 2 × %.2f ms (level %d) in two samples in a row", l.execP95, l.count, base, levels[0]), nil
		case l.availMB < 0.2*total:
			return out, fmt.Sprintf("MemAvailable %.0f MB < 20 %% of %.0f MB at %d sandboxes", l.availMB, total, l.count), nil
		}
	}
	return out, "", nil
}

// killParallel kills sandboxes over w goroutines.
func killParallel(sbxs []*rayito.Sandbox, w int) {
	ch := make(chan *rayito.Sandbox)
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range ch {
				kill(s)
			}
		}()
	}
	for _, s := range sbxs {
		ch <- s
	}
	close(ch)
	wg.Wait()
}
