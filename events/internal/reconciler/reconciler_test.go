package reconciler

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/rayito-dev/rayito/events/internal/forwarder"
	"github.com/rayito-dev/rayito/events/internal/store"
	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/sdk/microvms"
)

// controlPlane is the Lambda MicroVMs API at its one boundary: a loopback
// server answering ListMicrovms (two pages) and GetMicrovm from a table
// and recording every request, which the test asserts exactly. The
// reconciler talks to it through the SDK's real signing client.
type controlPlane struct {
	mu    sync.Mutex
	reqs  []string
	pages []microvmsapi.ListMicrovmsOutput
	vms   map[string]microvmsapi.State // GetMicrovm; absent: 404
}

func (cp *controlPlane) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(r.Header.Get("Authorization"), "/us-east-1/lambda/aws4_request") {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	cp.reqs = append(cp.reqs, r.Method+" "+r.URL.RequestURI())
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == microvmsapi.PathMicrovms:
		i := 0
		if tok := r.URL.Query().Get("nextToken"); tok != "" {
			i = int(tok[0] - '0')
		}
		json.NewEncoder(w).Encode(cp.pages[i])
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, microvmsapi.PathMicrovms+"/"):
		id := strings.TrimPrefix(r.URL.Path, microvmsapi.PathMicrovms+"/")
		st, ok := cp.vms[id]
		if !ok {
			w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
			w.WriteHeader(http.StatusNotFound)
			io.WriteString(w, `{"message":"not found"}`)
			return
		}
		json.NewEncoder(w).Encode(microvmsapi.Microvm{MicrovmID: id, State: st})
	default:
		w.WriteHeader(http.StatusBadRequest)
	}
}

func (cp *controlPlane) requests() []string {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	out := cp.reqs
	cp.reqs = nil
	return out
}

var t0 = time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)

// open stores a sandbox created (and maybe paused) at `at`.
func open(t *testing.T, s store.Store, id string, at time.Time, paused bool) {
	t.Helper()
	ctx := context.Background()
	evs := []events.Event{{EventID: EventID(id, 100), SandboxID: id, Type: events.Created, Generation: 1, OccurredAtMs: at.UnixMilli(), ImageARN: "arn:img"}}
	if paused {
		evs = append(evs, events.Event{EventID: EventID(id, 101), SandboxID: id, Type: events.Paused, Generation: 2, OccurredAtMs: at.UnixMilli(), ImageARN: "arn:img"})
	}
	for _, e := range evs {
		sb, _ := s.GetSandbox(ctx, id)
		next, reason := forwarder.Next(sb, e, at)
		if reason != "" {
			t.Fatal(reason)
		}
		if _, err := s.PutSandbox(ctx, sb, next); err != nil {
			t.Fatal(err)
		}
		if err := s.PutEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReconcile(t *testing.T) {
	cp := &controlPlane{
		pages: []microvmsapi.ListMicrovmsOutput{
			{Items: []microvmsapi.MicrovmSummary{{MicrovmID: "running", State: microvmsapi.StateRunning}, {MicrovmID: "terminated", State: microvmsapi.StateTerminated}}, NextToken: "1"},
			{Items: []microvmsapi.MicrovmSummary{{MicrovmID: "suspended", State: microvmsapi.StateSuspended}}},
		},
		vms: map[string]microvmsapi.State{"unlisted-but-running": microvmsapi.StateRunning, "unlisted-terminated": microvmsapi.StateTerminated},
	}
	srv := httptest.NewServer(cp)
	defer srv.Close()
	client, err := microvms.New(srv.URL, microvms.WithCredentials(credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")), microvms.WithRegion("us-east-1"), microvms.WithoutRateLimits(), microvms.WithMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	st := store.NewMemory()
	now := t0
	old := t0.Add(-time.Hour)
	open(t, st, "running", old, false)
	open(t, st, "terminated", old, true) // killed while suspended
	open(t, st, "suspended", old, true)
	open(t, st, "vanished", old, false)                      // no longer listed, 404
	open(t, st, "just-created", t0.Add(-time.Minute), false) // not listed yet: within the grace
	open(t, st, "unlisted-but-running", old, false)
	open(t, st, "unlisted-terminated", old, false)
	r := &Reconciler{Store: st, ControlPlane: client, Now: func() time.Time { return now }, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx := context.Background()
	sum, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Open != 7 || sum.Gone != 3 || sum.Written != 3 {
		t.Fatalf("%+v", sum)
	}
	want := []string{
		"GET " + microvmsapi.PathMicrovms + "?maxResults=50",
		"GET " + microvmsapi.PathMicrovms + "?maxResults=50&nextToken=1",
		"GET " + microvmsapi.PathMicrovms + "/unlisted-but-running",
		"GET " + microvmsapi.PathMicrovms + "/unlisted-terminated",
		"GET " + microvmsapi.PathMicrovms + "/vanished",
	}
	if got := cp.requests(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for id, gone := range map[string]bool{"running": false, "terminated": true, "suspended": false, "vanished": true, "just-created": false, "unlisted-but-running": false, "unlisted-terminated": true} {
		evs, _ := st.ListEvents(ctx, id, 0)
		last := evs[len(evs)-1]
		if !gone {
			if last.Type == events.Killed {
				t.Fatalf("%s killed", id)
			}
			continue
		}
		want := events.Event{EventID: EventID(id, last.Generation), SandboxID: id, Type: events.Killed, KillReason: events.KillUnknown, Generation: uint64(len(evs)), OccurredAtMs: now.UnixMilli(), ImageARN: "arn:img"}
		if last != want {
			t.Fatalf("%s: %+v, want %+v", id, last, want)
		}
		if err := last.Validate(); err != nil {
			t.Fatal(err)
		}
		sb, _ := st.GetSandbox(ctx, id)
		if !sb.Killed || sb.Open() {
			t.Fatalf("%s still open", id)
		}
	}
	// A second run writes nothing more: the killed ones left the index.
	now = now.Add(5 * time.Minute)
	sum, err = r.Run(ctx)
	if err != nil || sum.Open != 4 || sum.Written != 0 {
		t.Fatalf("second run %+v %v", sum, err)
	}
}

// TestKillIdempotent: a run that stopped between the state write and the
// event write is completed by the next with the same event, not a second.
func TestKillIdempotent(t *testing.T) {
	st := store.NewMemory()
	open(t, st, "s1", t0.Add(-time.Hour), false)
	ctx := context.Background()
	sb, _ := st.GetSandbox(ctx, "s1")
	r := &Reconciler{Store: failEvents{st}}
	if _, err := r.kill(ctx, sb, t0); err == nil {
		t.Fatal("want the event write to fail")
	}
	r.Store = st
	after, _ := st.GetSandbox(ctx, "s1")
	if wrote, err := r.kill(ctx, sb, t0.Add(time.Minute)); err != nil || !wrote {
		t.Fatalf("%v %v", wrote, err)
	}
	evs, _ := st.ListEvents(ctx, "s1", 0)
	if len(evs) != 2 || evs[1].EventID != EventID("s1", 2) || evs[1].EventID != after.LastEventID || evs[1].OccurredAtMs != t0.UnixMilli() {
		t.Fatalf("%+v", evs)
	}
	if wrote, _ := r.kill(ctx, after, t0); !wrote {
		t.Fatal("retry of the same kill")
	}
	if evs, _ := st.ListEvents(ctx, "s1", 0); len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	if EventID("s1", 2) == EventID("s1", 3) || EventID("s1", 2) != EventID("s1", 2) || len(EventID("x", 1)) != 32 {
		t.Fatal("EventID")
	}
}

type failEvents struct{ store.Store }

func (failEvents) PutEvent(context.Context, events.Event) error { return io.ErrUnexpectedEOF }
