package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/events"
)

var t0 = time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)

func mkEvent(sb string, n int, typ events.Type, gen uint64) events.Event {
	e := events.Event{EventID: fmt.Sprintf("%032x", n), SandboxID: sb, Type: typ, Generation: gen, OccurredAtMs: t0.UnixMilli() + int64(n), ImageARN: "arn:img"}
	if typ == events.Killed {
		e.KillReason = events.KillUnknown
	}
	return e
}

// contract is what every Store must do.
func contract(t *testing.T, s Store) {
	ctx := context.Background()
	t.Run("sandbox state", func(t *testing.T) {
		sb, err := s.GetSandbox(ctx, "sbx-a")
		if err != nil || sb.Version != 0 || sb.SandboxID != "sbx-a" {
			t.Fatalf("%+v %v", sb, err)
		}
		next := sb
		next.Created, next.LastEventID, next.LastType, next.LastGeneration, next.Tokens, next.BucketAtMs = true, "e1", events.Created, 1, 19.5, t0.UnixMilli()
		got, err := s.PutSandbox(ctx, sb, next)
		if err != nil || got.Version != 1 {
			t.Fatalf("%+v %v", got, err)
		}
		if _, err := s.PutSandbox(ctx, sb, next); !errors.Is(err, ErrConflict) {
			t.Fatalf("stale write: %v", err)
		}
		back, err := s.GetSandbox(ctx, "sbx-a")
		if err != nil || back != got {
			t.Fatalf("read back %+v, want %+v (%v)", back, got, err)
		}
		if _, err := s.GetSandbox(ctx, ""); !errors.Is(err, ErrInvalid) {
			t.Fatalf("empty id: %v", err)
		}
	})
	t.Run("events", func(t *testing.T) {
		evs := []events.Event{mkEvent("sbx-e", 3, events.Killed, 3), mkEvent("sbx-e", 1, events.Created, 1), mkEvent("sbx-e", 2, events.Paused, 2)}
		for _, e := range evs {
			if err := s.PutEvent(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PutEvent(ctx, evs[0]); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("duplicate: %v", err)
		}
		if has, err := s.HasEvent(ctx, "sbx-e", evs[1].EventID); !has || err != nil {
			t.Fatalf("has %v %v", has, err)
		}
		if has, _ := s.HasEvent(ctx, "sbx-other", evs[1].EventID); has {
			t.Fatal("event found under another sandbox")
		}
		got, err := s.ListEvents(ctx, "sbx-e", 0)
		if err != nil || len(got) != 3 || got[0] != evs[1] || got[1] != evs[2] || got[2] != evs[0] {
			t.Fatalf("%+v %v", got, err)
		}
		if got, _ := s.ListEvents(ctx, "sbx-e", 2); len(got) != 2 {
			t.Fatalf("limit: %d", len(got))
		}
	})
	t.Run("open index", func(t *testing.T) {
		// 7 sandboxes: 5 open, one killed, one never created.
		for i := 0; i < 7; i++ {
			id := fmt.Sprintf("sbx-o%d", i)
			sb, _ := s.GetSandbox(ctx, id)
			next := sb
			next.Created = i != 6
			next.Killed = i == 5
			if _, err := s.PutSandbox(ctx, sb, next); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]bool{}
		token := ""
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("paging does not end")
			}
			page, next, err := s.OpenSandboxes(ctx, token, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, sb := range page {
				if !sb.Open() {
					t.Fatalf("closed sandbox in the index: %+v", sb)
				}
				seen[sb.SandboxID] = true
			}
			if next == "" {
				break
			}
			token = next
		}
		for i := 0; i < 5; i++ {
			if !seen[fmt.Sprintf("sbx-o%d", i)] {
				t.Fatalf("sbx-o%d missing from %v", i, seen)
			}
		}
		if seen["sbx-o5"] || seen["sbx-o6"] {
			t.Fatalf("index has %v", seen)
		}
		// Killing one removes it from the index.
		sb, _ := s.GetSandbox(ctx, "sbx-o0")
		next := sb
		next.Killed = true
		if _, err := s.PutSandbox(ctx, sb, next); err != nil {
			t.Fatal(err)
		}
		page, _, _ := s.OpenSandboxes(ctx, "", 100)
		for _, sb := range page {
			if sb.SandboxID == "sbx-o0" {
				t.Fatal("killed sandbox still open")
			}
		}
	})
	t.Run("deliveries", func(t *testing.T) {
		if err := s.Claim(ctx, "ev1", "wh1", t0, t0.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		if err := s.Claim(ctx, "ev1", "wh1", t0, t0.Add(-time.Minute)); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("second claim: %v", err)
		}
		if err := s.Claim(ctx, "ev1", "wh2", t0, t0.Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
		// A claim still open past staleBefore is taken over; a finished one
		// never is.
		if err := s.Claim(ctx, "ev1", "wh2", t0.Add(3*time.Minute), t0.Add(2*time.Minute)); err != nil {
			t.Fatalf("take over a stale claim: %v", err)
		}
		if d, _ := s.GetDelivery(ctx, "ev1", "wh2"); d.Outcome != Claimed || !d.UpdatedAt.Equal(t0.Add(3*time.Minute)) {
			t.Fatalf("taken over: %+v", d)
		}
		if err := s.Claim(ctx, "ev1", "wh2", t0.Add(4*time.Minute), t0.Add(2*time.Minute)); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("fresh claim taken over: %v", err)
		}
		d, err := s.GetDelivery(ctx, "ev1", "wh1")
		if err != nil || d.Outcome != Claimed {
			t.Fatalf("%+v %v", d, err)
		}
		want := Delivery{EventID: "ev1", WebhookID: "wh1", Outcome: Failed, Attempts: 3, Status: 502, Reason: "status", UpdatedAt: t0.Add(time.Second)}
		if err := s.Finish(ctx, want); err != nil {
			t.Fatal(err)
		}
		if d, _ := s.GetDelivery(ctx, "ev1", "wh1"); d != want {
			t.Fatalf("%+v, want %+v", d, want)
		}
		if err := s.Claim(ctx, "ev1", "wh1", t0.Add(time.Hour), t0.Add(time.Hour)); !errors.Is(err, ErrDuplicate) {
			t.Fatalf("finished claim taken over: %v", err)
		}
		if err := s.Finish(ctx, Delivery{EventID: "nope", WebhookID: "wh1", Outcome: Delivered}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("finish unclaimed: %v", err)
		}
		if _, err := s.GetDelivery(ctx, "nope", "wh1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%v", err)
		}
	})
	t.Run("webhooks", func(t *testing.T) {
		ws := []Webhook{
			{WebhookID: "wh-b", URL: "https://b.example.com/", SecretRef: "rayito/webhooks/wh-b", CreatedAt: t0},
			{WebhookID: "wh-a", URL: "https://a.example.com/", SecretRef: "rayito/webhooks/wh-a", Types: []events.Type{events.Created, events.Killed}, CreatedAt: t0},
		}
		for _, w := range ws {
			if err := s.PutWebhook(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PutWebhook(ctx, Webhook{WebhookID: "x"}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("invalid webhook: %v", err)
		}
		got, err := s.ListWebhooks(ctx)
		if err != nil || len(got) != 2 || got[0].WebhookID != "wh-a" || len(got[0].Types) != 2 || got[1].URL != ws[0].URL || !got[0].CreatedAt.Equal(t0) {
			t.Fatalf("%+v %v", got, err)
		}
		if !got[0].Wants(events.Killed) || got[0].Wants(events.Paused) || !got[1].Wants(events.Paused) {
			t.Fatal("Wants")
		}
		if err := s.DeleteWebhook(ctx, "wh-a"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteWebhook(ctx, "wh-a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second delete: %v", err)
		}
		if got, _ := s.ListWebhooks(ctx); len(got) != 1 {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("concurrent conditional writes", func(t *testing.T) {
		// 8 writers race on one state item from the same version: exactly
		// one wins.
		sb, _ := s.GetSandbox(ctx, "sbx-race")
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				next := sb
				next.Created = true
				next.LastGeneration = uint64(i + 1)
				if _, err := s.PutSandbox(ctx, sb, next); err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else if !errors.Is(err, ErrConflict) {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d writers won", wins)
		}
	})
}

func TestMemory(t *testing.T) { contract(t, NewMemory()) }

func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.json")
	m, err := NewFile(path)
	if err != nil {
		t.Fatal(err)
	}
	contract(t, m)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%v %v", fi, err)
	}
	// Reopened, the file has everything.
	again, err := NewFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, _ := again.ListEvents(ctx, "sbx-e", 0)
	hooks, _ := again.ListWebhooks(ctx)
	sb, _ := again.GetSandbox(ctx, "sbx-a")
	if len(got) != 3 || len(hooks) != 1 || sb.Version != 1 || sb.Tokens != 19.5 {
		t.Fatalf("reopened: %d events, %d hooks, %+v", len(got), len(hooks), sb)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewFile(path); !errors.Is(err, ErrInvalid) {
		t.Fatalf("corrupt file: %v", err)
	}
}

// TestFileWriteFailure: a write that cannot be saved changes nothing in
// memory either.
func TestFileWriteFailure(t *testing.T) {
	// A path whose directory does not exist (a read-only directory would
	// not stop root).
	dir := t.TempDir()
	m, err := NewFile(filepath.Join(dir, "sub", "events.json"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.PutEvent(ctx, mkEvent("s", 1, events.Created, 1)); err == nil {
		t.Fatal("write to a missing directory succeeded")
	}
	if has, _ := m.HasEvent(ctx, "s", fmt.Sprintf("%032x", 1)); has {
		t.Fatal("failed write kept in memory")
	}
}

// TestMemoryExpire: events older than the TTL go with their claims, a
// killed sandbox's state goes once its last event is older than the TTL,
// an open sandbox's state stays; the file keeps the result.
func TestMemoryExpire(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.json")
	m, err := NewFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := mkEvent("sbx-old", 1, events.Killed, 2)
	fresh := mkEvent("sbx-new", 2, events.Created, 1)
	fresh.OccurredAtMs = t0.Add(TTL).UnixMilli()
	for _, e := range []events.Event{old, fresh} {
		if err := m.PutEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
		if err := m.Claim(ctx, e.EventID, "wh_1", t0, t0); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []Sandbox{{SandboxID: "sbx-old", Created: true, Killed: true, LastOccurredAtMs: old.OccurredAtMs}, {SandboxID: "sbx-new", Created: true, LastOccurredAtMs: t0.UnixMilli() - 1}} {
		if _, err := m.PutSandbox(ctx, Sandbox{SandboxID: s.SandboxID}, s); err != nil {
			t.Fatal(err)
		}
	}
	n, err := m.Expire(t0.Add(TTL + time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("Expire: %d, %v", n, err)
	}
	m2, err := NewFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Memory{m, m2} {
		if evs, _ := st.ListEvents(ctx, "sbx-old", 0); len(evs) != 0 {
			t.Fatal("an expired event stayed")
		}
		if _, err := st.GetDelivery(ctx, old.EventID, "wh_1"); !errors.Is(err, ErrNotFound) {
			t.Fatal("an expired event's claim stayed")
		}
		if evs, _ := st.ListEvents(ctx, "sbx-new", 0); len(evs) != 1 {
			t.Fatal("a fresh event went")
		}
		if s, _ := st.GetSandbox(ctx, "sbx-old"); s.Version != 0 {
			t.Fatal("a killed sandbox's state stayed")
		}
		if s, _ := st.GetSandbox(ctx, "sbx-new"); s.Version == 0 {
			t.Fatal("an open sandbox's state went")
		}
	}
	if n, err := m.Expire(t0.Add(TTL + time.Minute)); n != 0 || err != nil {
		t.Fatalf("second Expire: %d, %v", n, err)
	}
}
