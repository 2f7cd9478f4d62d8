package suites

import (
	"context"

	"github.com/rayito-dev/rayito/bench/internal/harness"
)

// Suite is one benchmark.
type Suite struct {
	Name string
	Run  func(ctx context.Context, e *Env) harness.Result
}

// All lists the suites in the order `-suite all` runs them.
func All() []Suite {
	return []Suite{
		{"create", Create},
		{"exec", Exec},
		{"stream", Stream},
		{"lines", Lines},
		{"files1m", Files1M},
		{"files100m", Files100M},
		{"checkpoint100m", Checkpoint},
		{"pty", Pty},
		{"pause", Pause},
		{"pool", Pool},
		{"runcode", RunCode},
		{"density", Density},
		{"memory", Memory},
		{"egress", Egress},
		{"secrets", Secrets},
	}
}

// Names lists the suite names.
func Names() []string {
	var out []string
	for _, s := range All() {
		out = append(out, s.Name)
	}
	return out
}
