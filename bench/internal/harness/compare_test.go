package harness

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func rep(exec, stream float64, extra float64) *Report {
	return &Report{Results: []Result{
		{Suite: "exec", Unit: "ms", R: &Summary{N: 10, P50: exec}},
		{Suite: "stream", Unit: "MB/s", HigherIsBetter: true, R: &Summary{N: 10, P50: stream}, Extra: map[string]*Summary{"lines": {N: 5, P50: extra}}},
		{Suite: "pty", Unavailable: "no peer"},
	}}
}

func TestCompare(t *testing.T) {
	bases := []*Report{rep(1.0, 600, 10), rep(1.2, 640, 12), rep(1.1, 620, 11)}
	c, err := Compare(bases, rep(1.5, 700, 11.5))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Change{}
	for _, ch := range c.Changes {
		got[ch.Metric] = ch
	}
	if ch := got["exec"]; ch.Verdict != VerdictSlower || ch.Base != 1.1 || ch.Low != 1.0 || ch.High != 1.2 || !ch.Measured || math.Abs(ch.Percent-36.36) > 0.01 {
		t.Errorf("exec: %+v", ch)
	}
	if ch := got["stream"]; ch.Verdict != VerdictFaster {
		t.Errorf("stream (higher is better): %+v", ch)
	}
	if ch := got["stream/lines"]; ch.Verdict != VerdictWithin {
		t.Errorf("stream/lines: %+v", ch)
	}
	if _, ok := got["pty"]; ok {
		t.Error("an unavailable suite was compared")
	}
	// One baseline: ±10 %; a metric on one side only is missing.
	one, _ := Compare(bases[:1], &Report{Results: []Result{{Suite: "exec", Unit: "ms", R: &Summary{P50: 1.05}}}})
	for _, ch := range one.Changes {
		switch ch.Metric {
		case "exec":
			if ch.Verdict != VerdictWithin || ch.Measured || math.Abs(ch.High-1.1) > 1e-9 {
				t.Errorf("one baseline: %+v", ch)
			}
		default:
			if ch.Verdict != VerdictMissing {
				t.Errorf("%s: %+v", ch.Metric, ch)
			}
		}
	}
	// Missing metrics still encode as JSON (no NaN).
	var js bytes.Buffer
	if err := json.NewEncoder(&js).Encode(one); err != nil || !strings.Contains(js.String(), `"only_in":"baselines"`) {
		t.Errorf("JSON: %v %s", err, js.String())
	}
	var out bytes.Buffer
	WriteComparison(&out, c)
	if !strings.Contains(out.String(), "SLOWER (outside the spread)") || !strings.Contains(out.String(), "3 baseline run(s)") {
		t.Errorf("table:\n%s", out.String())
	}
	if _, err := Compare(nil, rep(1, 1, 1)); err == nil {
		t.Error("no baseline: no error")
	}
}

func TestReadReport(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	var b bytes.Buffer
	if err := WriteJSON(&b, rep(1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(p, b.Bytes(), 0o600)
	r, err := ReadReport(p)
	if err != nil || len(r.Results) != 3 || r.Results[0].R.P50 != 1 {
		t.Fatalf("%v %v", r, err)
	}
	os.WriteFile(p, []byte("not json"), 0o600)
	if _, err := ReadReport(p); err == nil {
		t.Error("a bad file read")
	}
}
