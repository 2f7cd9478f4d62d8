package microvmsapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestMicrovmTimestamps: epoch seconds on the wire, as the service sends
// them; RFC 3339 still read (older state files); the other fields intact.
func TestMicrovmTimestamps(t *testing.T) {
	started := time.Date(2026, 12, 1, 10, 0, 0, 500_000_000, time.UTC)
	ended := started.Add(90 * time.Second)
	m := Microvm{MicrovmID: "microvm-1", State: StateTerminated, StartedAt: &started, TerminatedAt: &ended, MaximumDurationInSeconds: 60}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"startedAt":1796119200.5`) || !strings.Contains(string(b), `"terminatedAt":1796119290.5`) ||
		!strings.Contains(string(b), `"microvmId":"microvm-1"`) || strings.Count(string(b), "startedAt") != 1 {
		t.Fatalf("wire %s", b)
	}
	for _, in := range []string{string(b), `{"microvmId":"microvm-1","state":"TERMINATED","startedAt":"2026-12-01T10:00:00.5Z","terminatedAt":"2026-12-01T10:01:30.5Z","maximumDurationInSeconds":60}`} {
		var got Microvm
		if err := json.Unmarshal([]byte(in), &got); err != nil {
			t.Fatal(err)
		}
		if got.MicrovmID != "microvm-1" || got.MaximumDurationInSeconds != 60 || !got.StartedAt.Equal(started) || !got.TerminatedAt.Equal(ended) {
			t.Fatalf("%s: %+v", in, got)
		}
	}
	var none Microvm
	if err := json.Unmarshal([]byte(`{"microvmId":"x","state":"RUNNING"}`), &none); err != nil || none.StartedAt != nil || none.TerminatedAt != nil {
		t.Fatalf("absent: %+v %v", none, err)
	}
	s := MicrovmSummary{MicrovmID: "microvm-2", StartedAt: &started}
	b, _ = json.Marshal(s)
	var gs MicrovmSummary
	if err := json.Unmarshal(b, &gs); err != nil || !strings.Contains(string(b), `"startedAt":1796119200.5`) || !gs.StartedAt.Equal(started) || gs.MicrovmID != "microvm-2" {
		t.Fatalf("summary %s %+v %v", b, gs, err)
	}
	if err := json.Unmarshal([]byte(`{"startedAt":"yesterday"}`), &gs); err == nil {
		t.Fatal("a bad timestamp was accepted")
	}
}
