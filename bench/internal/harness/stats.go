// Package harness holds what every suite shares: the interleaved loop over
// the subjects F (floor), R (Rayito) and P (peer), nearest-rank summaries,
// the report with its machine facts, the goals of issue 5 and the table and
// JSON output.
package harness

import (
	"math"
	"slices"
	"time"
)

// Summary is min/p50/p95 (nearest rank) of one subject's samples, plus the
// largest sample.
type Summary struct {
	N   int     `json:"n"`
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	Max float64 `json:"max"`
}

// Percentile returns the nearest-rank p-th percentile (0<p<=100) of the
// sorted samples; NaN when there are none.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// Summarize sorts a copy of xs and summarizes it; nil when xs is empty.
func Summarize(xs []float64) *Summary {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return &Summary{N: len(s), Min: s[0], P50: Percentile(s, 50), P95: Percentile(s, 95), Max: s[len(s)-1]}
}

// Ms converts a duration to milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MBps is n bytes over d in MB/s (10^6 bytes).
func MBps(n int64, d time.Duration) float64 {
	if d <= 0 {
		return math.NaN()
	}
	return float64(n) / 1e6 / d.Seconds()
}
