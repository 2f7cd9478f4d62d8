package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
)

// DefaultTolerance is the spread assumed when there is one baseline run
// (no run-to-run spread can be measured from one): ±10 % of its median.
const DefaultTolerance = 0.10

// Verdicts of a compared metric.
const (
	VerdictWithin  = "within"  // inside the baselines' spread
	VerdictSlower  = "slower"  // outside it, worse
	VerdictFaster  = "faster"  // outside it, better
	VerdictMissing = "missing" // in the baselines, not in the new run (or the reverse)
)

// Change is one metric of a comparison: the new run's p50 against the
// baseline runs' p50s.
type Change struct {
	Metric string `json:"metric"` // suite, or suite/extra
	Unit   string `json:"unit,omitempty"`
	// HigherIsBetter: MB/s and the like.
	HigherIsBetter bool `json:"higher_is_better,omitempty"`
	// Base is the median of the baselines' p50s; Low and High bound the
	// spread: their p50s' range, or Base ± DefaultTolerance with one
	// baseline (Measured false).
	Base     float64 `json:"base"`
	Low      float64 `json:"low"`
	High     float64 `json:"high"`
	Measured bool    `json:"spread_measured"`
	New      float64 `json:"new"`
	// Percent is New against Base, in %.
	Percent float64 `json:"change_percent"`
	Verdict string  `json:"verdict"`
	// OnlyIn is "new" or "baselines" for a missing metric.
	OnlyIn string `json:"only_in,omitempty"`
}

// Comparison is the result of Compare.
type Comparison struct {
	Baselines int      `json:"baselines"`
	Changes   []Change `json:"changes"`
}

// ReadReport reads a report written by WriteJSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, fmt.Errorf("%s: not a bench report: %w", path, err)
	}
	return &rep, nil
}

type sample struct {
	unit   string
	higher bool
	p50    float64
}

// metricsOf is every p50 of R a report holds, by metric name.
func metricsOf(rep *Report) map[string]sample {
	out := map[string]sample{}
	for _, r := range rep.Results {
		if r.R != nil && !math.IsNaN(r.R.P50) {
			out[r.Suite] = sample{r.Unit, r.HigherIsBetter, r.R.P50}
		}
		for k, s := range r.Extra {
			if s != nil && !math.IsNaN(s.P50) {
				out[r.Suite+"/"+k] = sample{r.Unit, r.HigherIsBetter, s.P50}
			}
		}
	}
	return out
}

// Compare sets the new run against one or more baseline runs, metric by
// metric: a change is outside the spread when the new p50 lies beyond
// the range of the baselines' p50s (with one baseline, ±10 %). It is a
// report for a person, never a pass/fail gate: the machine is shared.
func Compare(baselines []*Report, latest *Report) (*Comparison, error) {
	if len(baselines) == 0 {
		return nil, fmt.Errorf("compare: no baseline run")
	}
	bases := make([]map[string]sample, len(baselines))
	names := map[string]bool{}
	for i, b := range baselines {
		bases[i] = metricsOf(b)
		for k := range bases[i] {
			names[k] = true
		}
	}
	now := metricsOf(latest)
	for k := range now {
		names[k] = true
	}
	c := &Comparison{Baselines: len(baselines)}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		var p50s []float64
		var meta sample
		for _, b := range bases {
			if s, ok := b[name]; ok {
				p50s = append(p50s, s.p50)
				meta = s
			}
		}
		n, ok := now[name]
		if !ok || len(p50s) == 0 {
			ch := Change{Metric: name, Verdict: VerdictMissing}
			if ok {
				ch.Unit, ch.HigherIsBetter, ch.New, ch.OnlyIn = n.unit, n.higher, n.p50, "new"
			} else {
				slices.Sort(p50s)
				ch.Unit, ch.HigherIsBetter, ch.Base, ch.OnlyIn = meta.unit, meta.higher, median(p50s), "baselines"
			}
			c.Changes = append(c.Changes, ch)
			continue
		}
		slices.Sort(p50s)
		ch := Change{Metric: name, Unit: n.unit, HigherIsBetter: n.higher, New: n.p50, Base: median(p50s)}
		if len(p50s) > 1 {
			ch.Low, ch.High, ch.Measured = p50s[0], p50s[len(p50s)-1], true
		} else {
			ch.Low, ch.High = ch.Base*(1-DefaultTolerance), ch.Base*(1+DefaultTolerance)
		}
		if ch.Base != 0 {
			ch.Percent = (ch.New - ch.Base) / ch.Base * 100
		}
		switch {
		case ch.New >= ch.Low && ch.New <= ch.High:
			ch.Verdict = VerdictWithin
		case (ch.New > ch.High) == ch.HigherIsBetter:
			ch.Verdict = VerdictFaster
		default:
			ch.Verdict = VerdictSlower
		}
		c.Changes = append(c.Changes, ch)
	}
	return c, nil
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// WriteComparison prints c for a person: one row per metric, the slower
// ones flagged.
func WriteComparison(w io.Writer, c *Comparison) {
	spread := "the range of the baselines' p50s"
	if c.Baselines == 1 {
		spread = fmt.Sprintf("±%.0f %% of the one baseline (pass several baselines for the measured spread)", DefaultTolerance*100)
	}
	fmt.Fprintf(w, "%d baseline run(s); spread: %s\n\n", c.Baselines, spread)
	rows := [][]string{{"metric", "unit", "base p50", "spread", "new p50", "change", "verdict"}}
	for _, ch := range c.Changes {
		if ch.Verdict == VerdictMissing {
			base, now := num(ch.Base), "-"
			if ch.OnlyIn == "new" {
				base, now = "-", num(ch.New)
			}
			rows = append(rows, []string{ch.Metric, ch.Unit, base, "-", now, "-", ch.Verdict + " (only in the " + ch.OnlyIn + ")"})
			continue
		}
		v := ch.Verdict
		if v == VerdictSlower {
			v = strings.ToUpper(v) + " (outside the spread)"
		} else if v == VerdictFaster {
			v += " (outside the spread)"
		}
		rows = append(rows, []string{ch.Metric, ch.Unit, num(ch.Base), num(ch.Low) + "–" + num(ch.High), num(ch.New), fmt.Sprintf("%+.1f %%", ch.Percent), v})
	}
	writeAligned(w, rows)
}
