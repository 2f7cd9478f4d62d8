package suites

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rayito-dev/rayito/bench/internal/harness"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// Memory is memory per idle sandbox (BENCHMARKS.md §2.9): N idle
// sandboxes, an idle wait, then PSS summed over every process in each
// sandbox's cgroup, and the MemAvailable drop per sandbox. F is the same
// for N namespaced `sleep infinity` processes.
func Memory(ctx context.Context, e *Env) harness.Result {
	n := max(1, e.n(e.MemoryN))
	r := harness.Result{Suite: "memory", Unit: "MB",
		Note: fmt.Sprintf("MB = 10^6 bytes; %d idle sandboxes after %s idle; R = per sandbox, PSS (smaps_rollup) summed over every process of its cgroup (init, rayd and helpers); F = one namespaced (%s) `sleep infinity` each, after 1 s; the platform (localvm) runs inside the harness process, its growth is reported separately",
			n, e.Idle, nsNote())}

	fpss, fdrop, err := e.floorMemory(ctx, n)
	if err != nil {
		return failed("memory", fmt.Errorf("F: %w", err))
	}
	r.F = harness.Summarize(fpss)
	r.Details = append(r.Details, fmt.Sprintf("F: PSS p50 %.3f MB per process; MemAvailable drop %.3f MB per process", r.F.P50, fdrop))

	selfPid := os.Getpid()
	debug.FreeOSMemory()
	self0, _ := e.Proc.PSS(selfPid)
	rss0, _ := e.Proc.RSS(selfPid)
	avail0, _, err := e.availMB()
	if err != nil {
		return failed("memory", err)
	}
	sbxs := make([]*rayito.Sandbox, 0, n)
	defer func() { killParallel(sbxs, 4) }()
	for i := 0; i < n; i++ {
		s, err := e.create(ctx)
		if err != nil {
			return failed("memory", fmt.Errorf("create %d of %d: %w", i+1, n, err))
		}
		sbxs = append(sbxs, s)
	}
	if err := e.pinSandboxes(sbxs...); err != nil {
		return failed("memory", err)
	}
	e.progress("memory: %d sandboxes idle for %s", n, e.Idle)
	select {
	case <-time.After(e.Idle):
	case <-ctx.Done():
		return failed("memory", ctx.Err())
	}
	avail1, _, err := e.availMB()
	if err != nil {
		return failed("memory", err)
	}
	debug.FreeOSMemory()
	self1, _ := e.Proc.PSS(selfPid)
	rss1, _ := e.Proc.RSS(selfPid)

	ids := make([]string, len(sbxs))
	for i, s := range sbxs {
		ids[i] = s.ID()
	}
	byID, err := e.Proc.PidsByCgroup(ids...)
	if err != nil {
		return failed("memory", err)
	}
	var per []float64
	var sum, rssSum, privSum float64
	for i, id := range ids {
		pids := byID[id]
		if len(pids) == 0 {
			return failed("memory", fmt.Errorf("no process found in the cgroup of sandbox %s", id))
		}
		var tot float64
		var parts []string
		for _, pid := range pids {
			ru, err := e.Proc.MemRollup(pid)
			if err != nil {
				continue // exited
			}
			tot += float64(ru.PSS)
			rssSum += float64(ru.RSS) / mb
			privSum += float64(ru.Private) / mb
			parts = append(parts, fmt.Sprintf("%s (pid %d) PSS %.2f RSS %.2f private %.2f", e.Proc.Comm(pid), pid, float64(ru.PSS)/mb, float64(ru.RSS)/mb, float64(ru.Private)/mb))
		}
		per = append(per, tot/mb)
		sum += tot / mb
		if i == 0 {
			slices.Sort(parts)
			r.Details = append(r.Details, fmt.Sprintf("R: processes of one sandbox (MB): %s", strings.Join(parts, "; ")))
		}
	}
	r.R = harness.Summarize(per)
	mean := sum / float64(len(per))
	drop := (avail0 - avail1) / float64(n)
	r.SetMetric(harness.MetricPSSPerSandboxMB, mean)
	r.SetMetric(harness.MetricMemAvailPerSbxMB, drop)
	r.SetMetric("rss_mb_per_sandbox", rssSum/float64(n))
	r.SetMetric("private_mb_per_sandbox", privSum/float64(n))
	r.SetMetric("platform_rss_growth_mb_per_sandbox", (float64(rss1)-float64(rss0))/mb/float64(n))
	r.SetMetric("platform_pss_growth_mb_per_sandbox", (float64(self1)-float64(self0))/mb/float64(n))
	r.Details = append(r.Details,
		fmt.Sprintf("R: PSS mean %.2f MB per sandbox (shared pages such as rayd's text are split over the %d sandboxes, so PSS falls as N grows); RSS mean %.2f MB; private (USS) mean %.2f MB", mean, n, rssSum/float64(n), privSum/float64(n)),
		fmt.Sprintf("R: MemAvailable drop %.2f MB per sandbox (includes page cache and kernel objects, and anything else running on the machine: noisy)", drop),
		fmt.Sprintf("platform share: the harness process (in-process localvm + SDK clients) changed by %.2f MB PSS and %.2f MB RSS per sandbox (PSS %.1f → %.1f MB, RSS %.1f → %.1f MB, after a GC each time), not counted in R",
			(float64(self1)-float64(self0))/mb/float64(n), (float64(rss1)-float64(rss0))/mb/float64(n),
			float64(self0)/mb, float64(self1)/mb, float64(rss0)/mb, float64(rss1)/mb))
	r.Finish()
	return r
}

// floorMemory starts n namespaced sleeps, waits 1 s and returns each one's
// PSS (MB) and the MemAvailable drop per process (MB).
func (e *Env) floorMemory(ctx context.Context, n int) ([]float64, float64, error) {
	var procs []*os.Process
	defer func() {
		for _, p := range procs {
			_ = p.Kill()
			_, _ = p.Wait()
		}
	}()
	avail0, _, err := e.availMB()
	if err != nil {
		return nil, 0, err
	}
	for i := 0; i < n; i++ {
		cmd := floorCmd("sleep", "infinity")
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		if err := e.Pin.Start(cmd); err != nil {
			return nil, 0, err
		}
		procs = append(procs, cmd.Process)
	}
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	avail1, _, err := e.availMB()
	if err != nil {
		return nil, 0, err
	}
	var pss []float64
	for _, p := range procs {
		v, err := e.Proc.PSS(p.Pid)
		if err != nil {
			return nil, 0, err
		}
		pss = append(pss, float64(v)/mb)
	}
	return pss, (avail0 - avail1) / float64(n), nil
}
