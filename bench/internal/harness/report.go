package harness

import (
	"math"
)

// Result is one suite's figures. F, R and P are nil when the subject did
// not run.
type Result struct {
	Suite string `json:"suite"`
	Unit  string `json:"unit,omitempty"`
	// HigherIsBetter is set for throughputs (MB/s).
	HigherIsBetter bool     `json:"higher_is_better,omitempty"`
	F              *Summary `json:"f,omitempty"`
	R              *Summary `json:"r,omitempty"`
	P              *Summary `json:"p,omitempty"`
	// RF and RP are the ratios of medians R/F and R/P (0 when unknown).
	RF float64 `json:"ratio_r_over_f_p50,omitempty"`
	RP float64 `json:"ratio_r_over_p_p50,omitempty"`
	// Extra holds secondary subjects (e.g. another floor), by name.
	Extra map[string]*Summary `json:"extra,omitempty"`
	// Metrics are single figures the goals read (burst wall time, density
	// level reached, PSS per sandbox...), by name with the unit in it.
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Details are extra lines for humans (e.g. one per density level).
	Details []string `json:"details,omitempty"`
	// Note says what F, R and P are.
	Note string `json:"note,omitempty"`
	// Unavailable says why the suite could not run (feature not landed,
	// peer not given); Error is a failure of the suite itself.
	Unavailable string `json:"unavailable,omitempty"`
	Error       string `json:"error,omitempty"`
}

// FromSamples builds a Result from a loop's samples: subjects named F, R
// and P fill those columns, any other name goes to Extra. Dropped optional
// subjects are appended to the note.
func FromSamples(suite, unit string, higher bool, s Samples, note string) Result {
	r := Result{Suite: suite, Unit: unit, HigherIsBetter: higher, Note: note}
	for name, xs := range s.By {
		sum := Summarize(xs)
		switch name {
		case "F":
			r.F = sum
		case "R":
			r.R = sum
		case "P":
			r.P = sum
		default:
			if r.Extra == nil {
				r.Extra = map[string]*Summary{}
			}
			r.Extra[name] = sum
		}
	}
	for _, d := range s.Dropped {
		r.Note += "; dropped " + d
	}
	return r
}

// SetMetric records a single figure.
func (r *Result) SetMetric(name string, v float64) {
	if r.Metrics == nil {
		r.Metrics = map[string]float64{}
	}
	r.Metrics[name] = v
}

// Metric returns a recorded figure and whether it exists.
func (r *Result) Metric(name string) (float64, bool) {
	v, ok := r.Metrics[name]
	return v, ok && !math.IsNaN(v)
}

// Finish computes the ratios of medians.
func (r *Result) Finish() {
	r.RF, r.RP = 0, 0
	if r.R == nil {
		return
	}
	if r.F != nil && r.F.P50 != 0 {
		r.RF = r.R.P50 / r.F.P50
	}
	if r.P != nil && r.P.P50 != 0 {
		r.RP = r.R.P50 / r.P.P50
	}
}

// Machine are the facts of the machine and run.
type Machine struct {
	Date       string  `json:"date"`
	Cores      int     `json:"cores"`
	CPUModel   string  `json:"cpu_model"`
	Kernel     string  `json:"kernel"`
	GoVersion  string  `json:"go_version"`
	Root       bool    `json:"root"`
	Privileged bool    `json:"privileged_localvm"`
	Pinned     bool    `json:"pinned"`
	PinNote    string  `json:"pin_note"`
	Peer       string  `json:"peer"`
	TempFS     string  `json:"temp_fs"`
	Args       string  `json:"args"`
	WallSecs   float64 `json:"wall_seconds"`
}

// Report is a whole run.
type Report struct {
	Machine Machine  `json:"machine"`
	Results []Result `json:"results"`
	Goals   []Goal   `json:"goals"`
}

// Find returns the result of a suite, or nil.
func (rep *Report) Find(suite string) *Result {
	for i := range rep.Results {
		if rep.Results[i].Suite == suite {
			return &rep.Results[i]
		}
	}
	return nil
}
