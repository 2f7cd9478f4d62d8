package main

import "testing"

func TestPercentiles(t *testing.T) {
	xs := []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11}
	s := summarize(xs)
	if s.N != 20 || s.Min != 1 || s.P50 != 10 || s.P95 != 19 {
		t.Fatalf("summarize = %+v", s)
	}
	if got := percentile([]float64{42}, 95); got != 42 {
		t.Fatalf("percentile single = %v", got)
	}
	if s := summarize(nil); s.N != 0 {
		t.Fatalf("empty = %+v", s)
	}
}
