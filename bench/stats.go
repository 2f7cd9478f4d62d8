package main

import (
	"math"
	"sort"
	"time"
)

// Summary is min/p50/p95 (nearest rank) of one subject's samples.
type Summary struct {
	N   int     `json:"n"`
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
}

// percentile returns the nearest-rank p-th percentile (0<p<=100) of sorted xs.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

func summarize(xs []float64) Summary {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return Summary{Min: math.NaN(), P50: math.NaN(), P95: math.NaN()}
	}
	return Summary{N: len(s), Min: s[0], P50: percentile(s, 50), P95: percentile(s, 95)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
