package lifeevents

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/events"
)

// writes records every Write call separately.
type writes struct {
	mu    sync.Mutex
	calls []string
	block chan struct{} // non-nil: every Write waits for it to close
}

func (w *writes) Write(p []byte) (int, error) {
	if w.block != nil {
		<-w.block
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, string(p))
	return len(p), nil
}

func (w *writes) snapshot() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...)
}

var key = bytes.Repeat([]byte{0x42}, events.KeySize)

const arn = "arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base:7"

func newEmitter(w *writes, at time.Time) *Emitter {
	return New(Options{Out: w, SandboxID: func() string { return "sbx-7" }, ImageARN: arn, Now: func() time.Time { return at }})
}

// decodeAll decodes each Write as exactly one line.
func decodeAll(t *testing.T, calls []string) []events.Event {
	t.Helper()
	var out []events.Event
	for _, c := range calls {
		if !strings.HasSuffix(c, "\n") || strings.Count(c, "\n") != 1 {
			t.Fatalf("a Write is not exactly one line: %q", c)
		}
		ev, _, err := events.Decode(key, strings.TrimSuffix(c, "\n"))
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		out = append(out, ev)
	}
	return out
}

func TestLifecycle(t *testing.T) {
	w := &writes{}
	at := time.UnixMilli(1767225600123)
	e := newEmitter(w, at)
	// No key: nothing.
	e.Paused()
	e.Resumed()
	if !e.Flush(time.Second) || len(w.snapshot()) != 0 || e.Generation() != 0 {
		t.Fatalf("lines without a key: %q", w.snapshot())
	}
	e.SetKey(key)
	e.SetKey(key) // applied again: no second created
	e.Paused()
	e.Resumed()
	e.Killed(events.KillTimeout)
	e.Killed(events.KillRequest) // only the first kill counts
	e.Paused()                   // nothing after killed
	e.SetKey(key)
	if !e.Flush(time.Second) {
		t.Fatal("not flushed")
	}
	evs := decodeAll(t, w.snapshot())
	want := []struct {
		typ    events.Type
		reason events.KillReason
	}{{events.Created, ""}, {events.Paused, ""}, {events.Resumed, ""}, {events.Killed, events.KillTimeout}}
	if len(evs) != len(want) {
		t.Fatalf("%d events: %+v", len(evs), evs)
	}
	ids := map[string]bool{}
	for i, ev := range evs {
		if ev.Type != want[i].typ || ev.KillReason != want[i].reason || ev.Generation != uint64(i+1) ||
			ev.SandboxID != "sbx-7" || ev.ImageARN != arn || ev.OccurredAtMs != at.UnixMilli() || ids[ev.EventID] {
			t.Errorf("event %d: %+v", i, ev)
		}
		ids[ev.EventID] = true
	}
}

func TestOffAndOn(t *testing.T) {
	w := &writes{}
	e := newEmitter(w, time.Now())
	e.SetKey(key)
	e.SetKey(nil) // off
	e.Paused()
	if e.Enabled() {
		t.Fatal("enabled after an empty key")
	}
	e.SetKey(key) // on again: no second created, the generation goes on
	e.Paused()
	e.Flush(time.Second)
	evs := decodeAll(t, w.snapshot())
	if len(evs) != 2 || evs[0].Type != events.Created || evs[1].Type != events.Paused || evs[1].Generation != 2 {
		t.Fatalf("%+v", evs)
	}
}

func TestKilledBeforeKey(t *testing.T) {
	w := &writes{}
	e := newEmitter(w, time.Now())
	e.Killed(events.KillUnknown)
	e.SetKey(key)
	e.Flush(time.Second)
	if len(w.snapshot()) != 0 {
		t.Fatalf("lines after the end: %q", w.snapshot())
	}
}

// A stdout that does not drain never blocks the lifecycle: lines beyond
// the queue are dropped and counted, and Flush gives up in time.
func TestBlockedStdout(t *testing.T) {
	w := &writes{block: make(chan struct{})}
	e := newEmitter(w, time.Now())
	e.SetKey(key)
	done := make(chan struct{})
	go func() {
		for range 2 * QueueLen {
			e.Paused()
			e.Resumed()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("emitting blocked on a stuck stdout")
	}
	start := time.Now()
	if e.Flush(100 * time.Millisecond) {
		t.Fatal("flushed a stuck stdout")
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("Flush took %v", el)
	}
	dropped := e.Dropped()
	close(w.block)
	if !e.Flush(5 * time.Second) {
		t.Fatal("not flushed once stdout drained")
	}
	// At most one line in the writer and QueueLen queued; every other
	// one dropped and counted.
	evs := decodeAll(t, w.snapshot())
	if len(evs) > QueueLen+1 || uint64(len(evs))+dropped != 4*QueueLen+1 {
		t.Fatalf("%d lines written, %d dropped", len(evs), dropped)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Generation <= evs[i-1].Generation {
			t.Fatalf("generations out of order: %d then %d", evs[i-1].Generation, evs[i].Generation)
		}
	}
}

func TestImageARN(t *testing.T) {
	for in, want := range map[string]string{
		"":                                 "",
		arn:                                arn,
		"not-an-arn":                       "",
		"arn:x\"y":                         "",
		"arn:x<y":                          "",
		"arn:" + strings.Repeat("a", 1021): "",
	} {
		if e := New(Options{ImageARN: in}); e.imageARN != want {
			t.Errorf("%q: %q", in, e.imageARN)
		}
	}
}
