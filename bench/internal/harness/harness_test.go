package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestSummarize(t *testing.T) {
	xs := []float64{10, 1, 9, 2, 8, 3, 7, 4, 6, 5, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11}
	s := Summarize(xs)
	if s.N != 20 || s.Min != 1 || s.P50 != 10 || s.P95 != 19 || s.Max != 20 {
		t.Fatalf("Summarize = %+v", s)
	}
	if xs[0] != 10 {
		t.Fatal("Summarize sorted its input")
	}
	if got := Percentile([]float64{42}, 95); got != 42 {
		t.Fatalf("single = %v", got)
	}
	if !math.IsNaN(Percentile(nil, 50)) || Summarize(nil) != nil {
		t.Fatal("empty input")
	}
}

func TestLoopInterleavesAndDiscardsWarmup(t *testing.T) {
	var order []string
	i := 0.0
	sub := func(name string, optional bool, failAt int) Subject {
		calls := 0
		return Subject{Name: name, Optional: optional, Run: func(context.Context) (float64, error) {
			calls++
			order = append(order, name)
			if calls == failAt {
				return 0, errors.New("boom")
			}
			i++
			return i, nil
		}}
	}
	s, err := Loop(context.Background(), 2, 3, sub("F", false, 0), sub("R", false, 0), sub("P", true, 2))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order[:6], ","); got != "F,R,P,F,R,P" {
		t.Fatalf("order %s", got)
	}
	if len(s.By["F"]) != 3 || len(s.By["R"]) != 3 {
		t.Fatalf("samples %v", s.By)
	}
	if _, ok := s.By["P"]; ok || len(s.Dropped) != 1 || !strings.HasPrefix(s.Dropped[0], "P: boom") {
		t.Fatalf("P not dropped: %v %v", s.By, s.Dropped)
	}
	// After warm-up (2 iterations of F,R,P then F,R) the first kept F is
	// the 6th value handed out.
	if s.By["F"][0] != 6 {
		t.Fatalf("warm-up not discarded: %v", s.By["F"])
	}
	if _, err := Loop(context.Background(), 0, 2, sub("F", false, 1)); err == nil || !strings.HasPrefix(err.Error(), "F: ") {
		t.Fatalf("err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Loop(ctx, 0, 2, sub("F", false, 0)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled loop: %v", err)
	}
}

func sum(p50, p95 float64) *Summary {
	return &Summary{N: 10, Min: p50 / 2, P50: p50, P95: p95, Max: p95}
}

func TestGoalsAndOutput(t *testing.T) {
	rep := &Report{Machine: Machine{Cores: 2, Peer: "not given"}}
	exec := Result{Suite: "exec", Unit: "ms", F: sum(2, 3), R: sum(3, 5), Note: "n"}
	stream := Result{Suite: "stream", Unit: "MB/s", HigherIsBetter: true, F: sum(2000, 2500), R: sum(100, 120), P: sum(40, 60)}
	mem := Result{Suite: "memory", Unit: "MB", R: sum(8, 9)}
	mem.SetMetric(MetricPSSPerSandboxMB, 8.5)
	dens := Result{Suite: "density", Unit: "ms", R: sum(300, 400)}
	dens.SetMetric(MetricDensityReached, 25)
	dens.SetMetric(MetricDensityMax, 25)
	for _, r := range []*Result{&exec, &stream, &mem, &dens} {
		r.Finish()
	}
	rep.Results = []Result{exec, stream, mem, dens,
		{Suite: "egress", Unavailable: "not available (feature not landed)"},
		{Suite: "files1m", Error: "boom"}}
	rep.Goals = EvaluateGoals(rep)
	status := map[string]string{}
	for _, g := range rep.Goals {
		status[g.Metric+"|"+g.Goal] = g.Status + "|" + g.Reason
	}
	want := map[string]string{
		"exec round trip|R ≤ F + 2 ms (p50)":                                Met + "|",
		"exec round trip|R ≤ 0.5 × P (p50)":                                 NotMeasurable + "|peer: not given",
		"streaming stdout|≥ 250 MB/s":                                       Missed + "|",
		"streaming stdout|≥ 2 × P":                                          Met + "|",
		"memory per idle sandbox|overhead ≤ 10 MB (PSS, no user processes)": Met + "|",
		"egress proxy|added p50 ≤ 0.2 ms (keep-alive)":                      NotMeasurable + "|not available (feature not landed)",
		"files 1 MiB|write+read ≤ F + 2 ms (p50)":                           NotMeasurable + "|suite failed: boom",
		"create → first command|p50 ≤ 10 × F":                               NotMeasurable + "|suite not run",
	}
	for k, v := range want {
		if status[k] != v {
			t.Errorf("goal %q = %q, want %q", k, status[k], v)
		}
	}
	if s := status["density|≥ 100 idle sandboxes (exec p95 ≤ 2 × level 10, MemAvailable ≥ 20 %)"]; !strings.HasPrefix(s, NotMeasurable+"|ramp capped at 25") {
		t.Errorf("density goal = %q", s)
	}
	if exec.RF != 1.5 || stream.RP != 2.5 {
		t.Fatalf("ratios %v %v", exec.RF, stream.RP)
	}

	var tb bytes.Buffer
	WriteTable(&tb, rep)
	out := tb.String()
	for _, s := range []string{"cores: 2", "R/F", "R/P", "exec ", "1.50", "egress", "not available", "files1m: error: boom", "goals (issue 5):", "[met] exec round trip"} {
		if !strings.Contains(out, s) {
			t.Errorf("table lacks %q:\n%s", s, out)
		}
	}
	var jb bytes.Buffer
	if err := WriteJSON(&jb, rep); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(jb.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Goals) != len(rep.Goals) || len(back.Results) != len(rep.Results) || back.Results[0].RF != 1.5 {
		t.Fatalf("JSON round trip lost data: %+v", back)
	}
}
