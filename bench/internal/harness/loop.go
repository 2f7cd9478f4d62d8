package harness

import (
	"context"
	"fmt"
)

// Subject is one side of a comparison: Run performs one timed operation and
// returns its figure (ms or MB/s, as the suite's unit says).
type Subject struct {
	// Name is F, R or P, or a secondary name such as "F bash".
	Name string
	Run  func(ctx context.Context) (float64, error)
	// Optional subjects (the peer, secondary floors) are dropped for the
	// rest of the loop when they fail; the failure is returned in
	// Samples.Dropped instead of failing the suite.
	Optional bool
}

// Samples are the measured figures per subject name, warm-up excluded.
type Samples struct {
	By map[string][]float64
	// Dropped holds "name: error" for optional subjects that failed.
	Dropped []string
}

// Loop runs warmup+n iterations; each iteration runs every subject once,
// in the order given (F, R, P, ...), so that drift hits all of them alike.
// The first warmup iterations are discarded. A failure of a subject that
// is not optional ends the loop with an error naming it.
func Loop(ctx context.Context, warmup, n int, subjects ...Subject) (Samples, error) {
	s := Samples{By: make(map[string][]float64, len(subjects))}
	active := make([]bool, len(subjects))
	for i, sub := range subjects {
		active[i] = sub.Run != nil
	}
	for it := 0; it < warmup+n; it++ {
		if err := ctx.Err(); err != nil {
			return s, err
		}
		for i, sub := range subjects {
			if !active[i] {
				continue
			}
			v, err := sub.Run(ctx)
			if err != nil {
				if !sub.Optional {
					return s, fmt.Errorf("%s: %w", sub.Name, err)
				}
				active[i] = false
				delete(s.By, sub.Name)
				s.Dropped = append(s.Dropped, fmt.Sprintf("%s: %v", sub.Name, err))
				continue
			}
			if it >= warmup {
				s.By[sub.Name] = append(s.By[sub.Name], v)
			}
		}
	}
	return s, nil
}
