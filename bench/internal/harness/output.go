package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "-"
	case math.Abs(v) >= 1000:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.1f", v)
	case math.Abs(v) >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func cols(s *Summary) []string {
	if s == nil {
		return []string{"-", "-", "-"}
	}
	return []string{num(s.Min), num(s.P50), num(s.P95)}
}

func ratio(v float64) string {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// WriteTable writes the report for humans: machine facts, one row per
// suite, notes and details, then the goals.
func WriteTable(w io.Writer, rep *Report) {
	m := rep.Machine
	fmt.Fprintf(w, "date: %s\ncores: %d\ncpu: %s\nkernel: %s\ngo: %s\nroot: %v, localvm privileged: %v\n",
		m.Date, m.Cores, m.CPUModel, m.Kernel, m.GoVersion, m.Root, m.Privileged)
	fmt.Fprintf(w, "pinned: %v (%s)\npeer: %s\ntemp fs: %s\nargs: %s\n", m.Pinned, m.PinNote, m.Peer, m.TempFS, m.Args)
	if m.WallSecs > 0 {
		fmt.Fprintf(w, "wall time: %.1f s\n", m.WallSecs)
	}
	fmt.Fprintln(w)

	header := []string{"suite", "unit", "n", "F min", "F p50", "F p95", "R min", "R p50", "R p95", "P min", "P p50", "P p95", "R/F", "R/P"}
	rows := [][]string{header}
	var notes []string
	for _, r := range rep.Results {
		switch {
		case r.Unavailable != "":
			notes = append(notes, fmt.Sprintf("%s: %s", r.Suite, r.Unavailable))
			rows = append(rows, []string{r.Suite, "", "", "not available"})
			continue
		case r.Error != "" && r.F == nil && r.R == nil:
			notes = append(notes, fmt.Sprintf("%s: error: %s", r.Suite, r.Error))
			rows = append(rows, []string{r.Suite, "", "", "error"})
			continue
		}
		n := "-"
		if r.R != nil {
			n = fmt.Sprint(r.R.N)
		} else if r.F != nil {
			n = fmt.Sprint(r.F.N)
		}
		row := []string{r.Suite, r.Unit, n}
		row = append(row, cols(r.F)...)
		row = append(row, cols(r.R)...)
		row = append(row, cols(r.P)...)
		row = append(row, ratio(r.RF), ratio(r.RP))
		rows = append(rows, row)
		if r.Error != "" {
			notes = append(notes, fmt.Sprintf("%s: error: %s", r.Suite, r.Error))
		}
	}
	writeAligned(w, rows)
	fmt.Fprintln(w, "  (MB/s rows: higher is better and \"min\" is the slowest run; ratios are of medians)")
	fmt.Fprintln(w)

	for _, r := range rep.Results {
		if r.Unavailable != "" {
			continue
		}
		if r.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", r.Suite, r.Note)
		}
		names := make([]string, 0, len(r.Extra))
		for k := range r.Extra {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			s := r.Extra[k]
			fmt.Fprintf(w, "  %s: n %d, min %s, p50 %s, p95 %s %s\n", k, s.N, num(s.Min), num(s.P50), num(s.P95), r.Unit)
		}
		for _, d := range r.Details {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}

	fmt.Fprintln(w, "\ngoals (issue 5):")
	for _, g := range rep.Goals {
		line := fmt.Sprintf("  [%s] %s: %s", g.Status, g.Metric, g.Goal)
		if g.Measured != "" {
			line += " — " + g.Measured
		}
		if g.Reason != "" {
			line += " (" + g.Reason + ")"
		}
		fmt.Fprintln(w, line)
	}
}

func writeAligned(w io.Writer, rows [][]string) {
	width := map[int]int{}
	for _, r := range rows {
		if len(r) < 5 { // unavailable/error rows do not set widths
			continue
		}
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			if len(r) < 5 && i == len(r)-1 {
				b.WriteString(c)
				break
			}
			pad := width[i] - len([]rune(c))
			if i < 2 {
				b.WriteString(c + strings.Repeat(" ", max(pad, 0)))
			} else {
				b.WriteString(strings.Repeat(" ", max(pad, 0)) + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
