package harness

import (
	"fmt"
)

// Goal statuses.
const (
	Met           = "met"
	Missed        = "missed"
	NotMeasurable = "not measurable"
)

// Goal is one goal of issue 5 with the figure this run measured.
type Goal struct {
	Metric   string `json:"metric"`
	Goal     string `json:"goal"`
	Measured string `json:"measured,omitempty"`
	Status   string `json:"status"`
	Reason   string `json:"reason,omitempty"`
}

type goalDef struct {
	metric, goal string
	eval         func(rep *Report) (measured string, ok bool, reason string)
}

// Metric names the suites record and the goals read.
const (
	MetricBurstMs           = "burst_wall_ms_p50"
	MetricDensityReached    = "density_level_reached"
	MetricDensityMax        = "density_level_max"
	MetricDensityRateMin    = "density_create_rate_min_per_s"
	MetricPSSPerSandboxMB   = "pss_mb_per_sandbox"
	MetricMemAvailPerSbxMB  = "memavailable_drop_mb_per_sandbox"
	MetricStreamHTTPFloor   = "f_http_mbps_p50"
	MetricFirstCellMs       = "first_cell_ms"
	MetricFirstCellPooledMs = "first_cell_pooled_ms"
	MetricEgressAddedP50    = "egress_added_ms_p50"
	MetricEgressRefusedP50  = "egress_refused_ms_p50"
	// The secrets suite: added p50 over the direct call, keep-alive and a
	// new connection per request, in ms.
	MetricSecretsGatewayAddedP50            = "secrets_gateway_added_ms_p50"
	MetricSecretsPlaceholderAddedP50        = "secrets_placeholder_added_ms_p50"
	MetricSecretsGatewayNewConnAddedP50     = "secrets_gateway_newconn_added_ms_p50"
	MetricSecretsPlaceholderNewConnAddedP50 = "secrets_placeholder_newconn_added_ms_p50"
	MetricUpdateNetworkP50                  = "update_network_ms_p50"
	MetricResumeP50                         = "resume_ms_p50"
	MetricResumeP95                         = "resume_ms_p95"
)

// notMeasurable is a reason for a goal whose inputs are missing.
func missing(r *Result, what string) string {
	switch {
	case r == nil:
		return "suite not run"
	case r.Unavailable != "":
		return r.Unavailable
	case r.Error != "":
		return "suite failed: " + r.Error
	default:
		return what + " not measured"
	}
}

var goalDefs = []goalDef{
	{"create → first command", "p50 ≤ 10 × F", func(rep *Report) (string, bool, string) {
		r := rep.Find("create")
		if r == nil || r.R == nil || r.F == nil {
			return "", false, missing(r, "F or R")
		}
		return fmt.Sprintf("R p50 %.1f ms vs 10 × F %.2f = %.1f ms (%.1f×)", r.R.P50, r.F.P50, 10*r.F.P50, r.RF), r.R.P50 <= 10*r.F.P50, ""
	}},
	{"create → first command", "p95 ≤ 20 × F", func(rep *Report) (string, bool, string) {
		r := rep.Find("create")
		if r == nil || r.R == nil || r.F == nil {
			return "", false, missing(r, "F or R")
		}
		return fmt.Sprintf("R p95 %.1f ms vs 20 × F p95 %.2f = %.1f ms", r.R.P95, r.F.P95, 20*r.F.P95), r.R.P95 <= 20*r.F.P95, ""
	}},
	{"create → first command", "burst of 10 ≤ 2 × one sequential p95", func(rep *Report) (string, bool, string) {
		r := rep.Find("create")
		b, ok := metric(r, MetricBurstMs)
		if !ok || r.R == nil {
			return "", false, missing(r, "burst")
		}
		return fmt.Sprintf("burst p50 %.1f ms vs 2 × %.1f = %.1f ms", b, r.R.P95, 2*r.R.P95), b <= 2*r.R.P95, ""
	}},
	{"exec round trip", "R ≤ F + 2 ms (p50)", func(rep *Report) (string, bool, string) {
		r := rep.Find("exec")
		if r == nil || r.R == nil || r.F == nil {
			return "", false, missing(r, "F or R")
		}
		return fmt.Sprintf("R p50 %.3f ms vs F %.3f + 2 = %.3f ms", r.R.P50, r.F.P50, r.F.P50+2), r.R.P50 <= r.F.P50+2, ""
	}},
	{"exec round trip", "R ≤ 0.5 × P (p50)", func(rep *Report) (string, bool, string) {
		return vsPeer(rep, "exec", 0.5, false)
	}},
	{"streaming stdout", "≥ 250 MB/s", func(rep *Report) (string, bool, string) {
		r := rep.Find("stream")
		if r == nil || r.R == nil {
			return "", false, missing(r, "R")
		}
		return fmt.Sprintf("R p50 %.1f MB/s", r.R.P50), r.R.P50 >= 250, ""
	}},
	{"streaming stdout", "≥ 2 × P", func(rep *Report) (string, bool, string) {
		return vsPeer(rep, "stream", 2, true)
	}},
	{"files 1 MiB", "write+read ≤ F + 2 ms (p50)", func(rep *Report) (string, bool, string) {
		r := rep.Find("files1m")
		if r == nil || r.R == nil || r.F == nil {
			return "", false, missing(r, "F or R")
		}
		return fmt.Sprintf("R p50 %.2f ms vs F %.2f + 2 = %.2f ms", r.R.P50, r.F.P50, r.F.P50+2), r.R.P50 <= r.F.P50+2, ""
	}},
	{"files 100 MiB", "≥ 50 % of F's disk bandwidth (p50)", func(rep *Report) (string, bool, string) {
		r := rep.Find("files100m")
		if r == nil || r.R == nil || r.F == nil {
			return "", false, missing(r, "F or R")
		}
		pct := 100 * r.F.P50 / r.R.P50
		return fmt.Sprintf("R %.0f ms vs F %.0f ms for write+read: %.0f %% of F's bandwidth", r.R.P50, r.F.P50, pct), pct >= 50, ""
	}},
	{"files 100 MiB", "≥ P (p50)", func(rep *Report) (string, bool, string) {
		return vsPeer(rep, "files100m", 1, false)
	}},
	{"PTY echo", "p50 ≤ 1 ms", func(rep *Report) (string, bool, string) {
		r := rep.Find("pty")
		if r == nil || r.R == nil {
			return "", false, missing(r, "R")
		}
		return fmt.Sprintf("R p50 %.3f ms", r.R.P50), r.R.P50 <= 1, ""
	}},
	{"PTY echo", "p95 ≤ 3 ms", func(rep *Report) (string, bool, string) {
		r := rep.Find("pty")
		if r == nil || r.R == nil {
			return "", false, missing(r, "R")
		}
		return fmt.Sprintf("R p95 %.3f ms", r.R.P95), r.R.P95 <= 3, ""
	}},
	{"run_code 1+1", "p50 ≤ 5 ms warm", func(rep *Report) (string, bool, string) {
		r := rep.Find("runcode")
		if r == nil || r.R == nil {
			return "", false, missing(r, "R")
		}
		return fmt.Sprintf("R p50 %.3f ms", r.R.P50), r.R.P50 <= 5, ""
	}},
	{"run_code 1+1", "p50 ≤ F + 3 ms", func(rep *Report) (string, bool, string) {
		r := rep.Find("runcode")
		if r == nil || r.R == nil || r.F == nil {
			return "", false, missing(r, "F or R")
		}
		return fmt.Sprintf("R p50 %.3f ms vs F %.3f + 3 = %.3f ms", r.R.P50, r.F.P50, r.F.P50+3), r.R.P50 <= r.F.P50+3, ""
	}},
	{"run_code first cell", "≤ 0.5 s after create (the better of booted on request and pre-booted)", func(rep *Report) (string, bool, string) {
		r := rep.Find("runcode")
		ms, ok := metric(r, MetricFirstCellMs)
		if !ok {
			return "", false, missing(r, "first cell")
		}
		got := fmt.Sprintf("booted on request %.0f ms", ms)
		if pooled, ok := metric(r, MetricFirstCellPooledMs); ok {
			got += fmt.Sprintf(", pre-booted %.0f ms", pooled)
			ms = min(ms, pooled)
		}
		return got, ms <= 500, ""
	}},
	{"run_code stream", "3 MB of prints ≥ 100 MB/s (p50)", func(rep *Report) (string, bool, string) {
		r := rep.Find("runcode stream")
		if r == nil || r.R == nil {
			return "", false, missing(r, "R")
		}
		return fmt.Sprintf("R p50 %.1f MB/s", r.R.P50), r.R.P50 >= 100, ""
	}},
	{"density", "≥ 100 idle sandboxes (exec p95 ≤ 2 × level 10, MemAvailable ≥ 20 %)", func(rep *Report) (string, bool, string) {
		r := rep.Find("density")
		n, ok := metric(r, MetricDensityReached)
		if !ok {
			return "", false, missing(r, "density level")
		}
		mx, _ := metric(r, MetricDensityMax)
		if n < 100 && mx < 100 {
			return "", false, fmt.Sprintf("ramp capped at %.0f by -density-max (reached %.0f)", mx, n)
		}
		return fmt.Sprintf("%.0f idle sandboxes held", n), n >= 100, ""
	}},
	{"density (BENCHMARKS.md §2.8)", "creation ≥ 20 sandboxes/s", func(rep *Report) (string, bool, string) {
		r := rep.Find("density")
		v, ok := metric(r, MetricDensityRateMin)
		if !ok {
			return "", false, missing(r, "creation rate")
		}
		return fmt.Sprintf("slowest ramp step %.1f sandboxes/s", v), v >= 20, ""
	}},
	{"memory per idle sandbox", "overhead ≤ 10 MB (PSS, no user processes)", func(rep *Report) (string, bool, string) {
		r := rep.Find("memory")
		v, ok := metric(r, MetricPSSPerSandboxMB)
		if !ok {
			return "", false, missing(r, "PSS")
		}
		s := fmt.Sprintf("%.2f MB PSS per sandbox", v)
		if d, ok := metric(r, MetricMemAvailPerSbxMB); ok {
			s += fmt.Sprintf(" (MemAvailable drop %.2f MB per sandbox)", d)
		}
		return s, v <= 10, ""
	}},
	{"egress proxy", "added p50 ≤ 0.2 ms (keep-alive)", func(rep *Report) (string, bool, string) {
		r := rep.Find("egress")
		v, ok := metric(r, MetricEgressAddedP50)
		if !ok {
			return "", false, missing(r, "egress")
		}
		return fmt.Sprintf("R p50 - F p50 = %.3f ms", v), v <= 0.2, ""
	}},
	{"egress proxy", "throughput ≥ 50 % of direct (p50)", func(rep *Report) (string, bool, string) {
		r := rep.Find("egress (100 MiB)")
		if r == nil || r.R == nil || r.F == nil {
			return "", false, missing(r, "F or R")
		}
		return fmt.Sprintf("R %.0f MB/s vs F %.0f MB/s (%.0f %%)", r.R.P50, r.F.P50, 100*r.R.P50/r.F.P50), r.R.P50 >= 0.5*r.F.P50, ""
	}},
	{"egress proxy", "denied connection fails in ≤ 5 ms", func(rep *Report) (string, bool, string) {
		r := rep.Find("egress")
		v, ok := metric(r, MetricEgressRefusedP50)
		if !ok {
			return "", false, missing(r, "egress")
		}
		return fmt.Sprintf("p50 %.3f ms", v), v <= 5, ""
	}},
	{"egress proxy", "UpdateNetwork applies in ≤ 20 ms (p50)", func(rep *Report) (string, bool, string) {
		r := rep.Find("egress")
		v, ok := metric(r, MetricUpdateNetworkP50)
		if !ok {
			return "", false, missing(r, "egress")
		}
		return fmt.Sprintf("p50 %.2f ms", v), v <= 20, ""
	}},
	{"secret gateway", "added p50 ≤ 1 ms (keep-alive)", func(rep *Report) (string, bool, string) {
		r := rep.Find("secrets gateway")
		v, ok := metric(r, MetricSecretsGatewayAddedP50)
		if !ok {
			return "", false, missing(r, "secrets gateway")
		}
		return fmt.Sprintf("R p50 - F p50 = %.3f ms", v), v <= 1, ""
	}},
	{"secret placeholder", "added p50 ≤ 1 ms (keep-alive)", func(rep *Report) (string, bool, string) {
		r := rep.Find("secrets placeholder")
		v, ok := metric(r, MetricSecretsPlaceholderAddedP50)
		if !ok {
			return "", false, missing(r, "secrets placeholder")
		}
		return fmt.Sprintf("R p50 - F p50 = %.3f ms", v), v <= 1, ""
	}},
	{"pause", "p50 ≤ 10 ms", func(rep *Report) (string, bool, string) {
		r := rep.Find("pause")
		if r == nil || r.R == nil {
			return "", false, missing(r, "R")
		}
		return fmt.Sprintf("R p50 %.2f ms, p95 %.2f ms", r.R.P50, r.R.P95), r.R.P50 <= 10, ""
	}},
	{"resume", "p50 ≤ 10 ms", func(rep *Report) (string, bool, string) {
		r := rep.Find("pause")
		p50, ok := metric(r, MetricResumeP50)
		if !ok {
			return "", false, missing(r, "resume")
		}
		p95, _ := metric(r, MetricResumeP95)
		return fmt.Sprintf("R p50 %.2f ms, p95 %.2f ms", p50, p95), p50 <= 10, ""
	}},
}

func metric(r *Result, name string) (float64, bool) {
	if r == nil {
		return 0, false
	}
	return r.Metric(name)
}

// vsPeer checks R against factor × P on p50: for throughputs R ≥ factor ×
// P, for times R ≤ factor × P.
func vsPeer(rep *Report, suite string, factor float64, higher bool) (string, bool, string) {
	r := rep.Find(suite)
	if r == nil || r.R == nil {
		return "", false, missing(r, "R")
	}
	if r.P == nil {
		reason := "peer: not given"
		if rep.Machine.Peer != "" && rep.Machine.Peer != "not given" {
			reason = "peer did not run in this suite"
		}
		return "", false, reason
	}
	m := fmt.Sprintf("R p50 %.3f vs %.2g × P %.3f = %.3f %s", r.R.P50, factor, r.P.P50, factor*r.P.P50, r.Unit)
	if higher {
		return m, r.R.P50 >= factor*r.P.P50, ""
	}
	return m, r.R.P50 <= factor*r.P.P50, ""
}

// EvaluateGoals lists every goal of issue 5 with its measured value and
// status.
func EvaluateGoals(rep *Report) []Goal {
	out := make([]Goal, 0, len(goalDefs))
	for _, d := range goalDefs {
		measured, ok, reason := d.eval(rep)
		g := Goal{Metric: d.metric, Goal: d.goal, Measured: measured}
		switch {
		case measured == "":
			g.Status, g.Reason = NotMeasurable, reason
		case ok:
			g.Status = Met
		default:
			g.Status, g.Reason = Missed, reason
		}
		out = append(out, g)
	}
	return out
}
