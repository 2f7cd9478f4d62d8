package suites

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Metrics of the pool suite.
const (
	// MetricPoolTakeP50 is the pool suite's R p50: Take + the first
	// command, in ms.
	MetricPoolTakeP50 = "pool_take_first_command_ms_p50"
	// MetricPoolTakeOverResume is R p50 / F p50: Take + first command
	// over a bare Resume (issue 31's target: at most 2).
	MetricPoolTakeOverResume = "pool_take_over_resume_p50"
	// MetricPoolTakeOverCreate is R p50 / "R create" p50.
	MetricPoolTakeOverCreate = "pool_take_over_create_p50"
)

// poolSize is the pool the suite takes from.
const poolSize = 3

// poolSettle is the quiet time before every timed call of the suite, for
// every subject alike: a pool's slot was paused a while before a Take,
// so the floor's sandbox is too, and no subject starts right behind the
// previous one's work (a resume straight after a busy moment was 30–40 %
// faster on this machine than one after a quiet moment, whatever the
// subject).
const poolSettle = 250 * time.Millisecond

// echo runs `echo ok` in s and checks its output.
func echo(ctx context.Context, s *rayito.Sandbox) error {
	res, err := s.Commands.Run(ctx, "echo ok")
	if err == nil && res.Stdout != "ok\n" {
		err = fmt.Errorf("echo ok gave %q", res.Stdout)
	}
	return err
}

func closePool(p *rayito.SandboxPool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = p.Close(ctx)
}

// Pool is a warm pool's hand-out (issue 31): R = SandboxPool.Take from
// a pool of 3 paused sandboxes (resume, Health ready) + Commands.Run("echo
// ok"), the sandbox's first command; "R warmed" = the same from a second
// pool whose Warmup ran a command before each pause; "R create" = rayito.Create + the same command (no pool); F = a
// bare Sandbox.Resume of a paused sandbox (what any Take must at least
// do) and "F echo" = that Resume + the same command. Interleaved, n=30.
// Before every iteration, outside the timers, the pool is full again (the
// harness waits for Stats().Ready == 3) and the F sandbox is paused, and
// every timed call starts after poolSettle of quiet; the
// sandboxes taken or created are killed and waited for, outside the
// timers. It needs the root platform (pause is the cgroup freezer).
func Pool(ctx context.Context, e *Env) harness.Result {
	if os.Geteuid() != 0 {
		return harness.Result{Suite: "pool", Unavailable: "the pool pauses its sandboxes, which needs the root platform (cgroup freezer): run the bench as root"}
	}
	pool, err := rayito.NewPool(ctx, rayito.PoolConfig{Size: poolSize, Create: e.opts()})
	if err != nil {
		return failed("pool", fmt.Errorf("new pool: %w", err))
	}
	defer closePool(pool)
	// The second pool's sandboxes ran one command before their pause.
	warmed, err := rayito.NewPool(ctx, rayito.PoolConfig{Size: poolSize, Create: e.opts(), Warmup: func(ctx context.Context, s *rayito.Sandbox) error {
		_, err := s.Commands.Run(ctx, "true")
		return err
	}})
	if err != nil {
		return failed("pool", fmt.Errorf("new pool: %w", err))
	}
	defer closePool(warmed)
	full := func(ctx context.Context) error {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		for pool.Stats().Ready < poolSize || warmed.Stats().Ready < poolSize {
			if err := wctx.Err(); err != nil {
				return fmt.Errorf("the pools did not refill: %+v, %+v", pool.Stats(), warmed.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	take := func(ctx context.Context, p *rayito.SandboxPool) (float64, error) {
		if err := full(ctx); err != nil {
			return 0, err
		}
		time.Sleep(poolSettle)
		hits := p.Stats().Hits
		var sbx *rayito.Sandbox
		d, err := timeIt(func() error {
			var err error
			if sbx, err = p.Take(ctx); err != nil {
				return err
			}
			return echo(ctx, sbx)
		})
		if err == nil && p.Stats().Hits != hits+1 {
			err = errors.New("Take did not hand out a pool slot")
		}
		killAndWait(sbx)
		return d, err
	}
	floor, err := e.create(ctx)
	if err != nil {
		return failed("pool", fmt.Errorf("create: %w", err))
	}
	defer killAndWait(floor)
	resume := func(ctx context.Context, withEcho bool) (float64, error) {
		if err := floor.Pause(ctx); err != nil {
			return 0, fmt.Errorf("pause: %w", err)
		}
		time.Sleep(poolSettle)
		return timeIt(func() error {
			if err := floor.Resume(ctx); err != nil {
				return err
			}
			if withEcho {
				return echo(ctx, floor)
			}
			return nil
		})
	}
	subjects := []harness.Subject{
		{Name: "F", Run: func(ctx context.Context) (float64, error) { return resume(ctx, false) }},
		{Name: "F echo", Run: func(ctx context.Context) (float64, error) { return resume(ctx, true) }},
		{Name: "R", Run: func(ctx context.Context) (float64, error) { return take(ctx, pool) }},
		{Name: "R warmed", Run: func(ctx context.Context) (float64, error) { return take(ctx, warmed) }},
		{Name: "R create", Run: func(ctx context.Context) (float64, error) {
			if err := full(ctx); err != nil {
				return 0, err
			}
			time.Sleep(poolSettle)
			var sbx *rayito.Sandbox
			d, err := timeIt(func() error {
				var err error
				sbx, err = e.createAndEcho(ctx)
				return err
			})
			killAndWait(sbx)
			return d, err
		}},
	}
	s, err := harness.Loop(ctx, e.warmup(2), e.n(30), subjects...)
	if err != nil {
		return failed("pool", err)
	}
	r := harness.FromSamples("pool", "ms", false, s,
		"R = SandboxPool.Take from a full pool of 3 paused sandboxes (ResumeMicrovm, the cgroup thaw, Health ready) + Commands.Run(\"echo ok\"), the sandbox's first command; R warmed = the same from a second pool of 3 whose Warmup ran `true` before each pause; R create = rayito.Create + the same command; F = a bare Sandbox.Resume of a paused sandbox, F echo = that Resume + the same command; the pool refilled and the F sandbox paused before each iteration, then 250 ms of quiet before every timed call, kills waited for, all outside the timers")
	poolDetails(&r, pool.Stats())
	return r
}

// poolDetails adds the take's metrics against a bare resume and a create,
// and st, the plain pool's stats, to r.
func poolDetails(r *harness.Result, st rayito.PoolStats) {
	if r.R != nil {
		r.SetMetric(MetricPoolTakeP50, r.R.P50)
		if r.F != nil && r.F.P50 > 0 {
			r.SetMetric(MetricPoolTakeOverResume, r.R.P50/r.F.P50)
			r.Details = append(r.Details, fmt.Sprintf("Take + first command p50 %.1f ms = %.2f × a bare resume (p50 %.1f ms); target ≤ 2×", r.R.P50, r.R.P50/r.F.P50, r.F.P50))
		}
		if c := r.Extra["R create"]; c != nil && c.P50 > 0 {
			r.SetMetric(MetricPoolTakeOverCreate, r.R.P50/c.P50)
			r.Details = append(r.Details, fmt.Sprintf("Take + first command p50 %.1f / p95 %.1f ms vs Create + first command p50 %.1f / p95 %.1f ms: %.2f× the create's p50", r.R.P50, r.R.P95, c.P50, c.P95, r.R.P50/c.P50))
		}
	}
	if w := r.Extra["R warmed"]; w != nil && r.F != nil && r.F.P50 > 0 {
		r.Details = append(r.Details, fmt.Sprintf("Take + a command from a warmed pool p50 %.1f / p95 %.1f ms = %.2f × a bare resume", w.P50, w.P95, w.P50/r.F.P50))
	}
	r.Details = append(r.Details, fmt.Sprintf("pool stats: taken %d (hits %d, fallbacks %d), fill failures %d, resume failures %d, swept %d", st.Taken, st.Hits, st.Fallbacks, st.FillFailures, st.ResumeFailures, st.Swept))
}
