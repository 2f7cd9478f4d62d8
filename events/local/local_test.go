package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/events/local"
	"github.com/rayito-dev/rayito/proto/events"
)

var quiet = slog.New(slog.DiscardHandler)

type receiver struct {
	srv    *httptest.Server
	secret string
	id     string
	mu     sync.Mutex
	types  []string
	dials  atomic.Int32
	errs   []error
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err := events.VerifyWebhook(req.Header, body, r.secret, r.id, time.Now()); err != nil {
			r.errs = append(r.errs, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if got := req.Header.Get(events.HeaderE2BSignature); got != events.E2BSignature(r.secret, body) {
			r.errs = append(r.errs, errors.New("e2b-signature differs"))
		}
		var b struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(body, &b)
		r.types = append(r.types, b.Type)
	}))
	r.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.dials.Add(1)
		}
	}
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) roots() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
}

func lines(t *testing.T, stackKey []byte, sbx string) []string {
	key := events.SandboxKey(stackKey, sbx)
	var out []string
	now := time.Now()
	for i, typ := range []events.Type{events.Created, events.Paused, events.Resumed, events.Killed} {
		id, _ := events.NewEventID()
		ev := events.Event{EventID: id, SandboxID: sbx, Type: typ, Generation: uint64(i + 1), OccurredAtMs: now.Add(time.Duration(i) * time.Millisecond).UnixMilli()}
		if typ == events.Killed {
			ev.KillReason = events.KillRequest
		}
		l, err := events.Encode(key, ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l, `{"level":"INFO","msg":"rayd output between"}`)
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPipelineLoopback: four signed lines delivered in order to an HTTPS
// receiver on loopback (AllowLoopback, its CA as an extra root), both
// signatures verified; the same lines again are duplicates; another
// sandbox's key or id is refused; the store, secrets and directory are
// private; reopened without AllowLoopback the receiver is never dialled
// and the delivery is recorded as failed (blocked_address).
func TestPipelineLoopback(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "events")
	stackKey := bytes.Repeat([]byte{7}, 32)
	rc := newReceiver(t)
	p, err := local.New(local.Options{Dir: dir, StackKey: stackKey, AllowLoopback: true, ExtraRoots: rc.roots(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	w, secret, err := p.Register(ctx, local.Registration{URL: rc.srv.URL + "/hook"})
	if err != nil {
		t.Fatal(err)
	}
	if len(secret) < local.MinSecretLen {
		t.Fatalf("secret of %d bytes", len(secret))
	}
	rc.mu.Lock()
	rc.secret, rc.id = secret, w.ID
	rc.mu.Unlock()

	ls := lines(t, stackKey, "sbx-1")
	sum, err := p.Ingest(ctx, "sbx-1", ls...)
	if err != nil || sum.Admitted != 4 || sum.Ignored != 4 {
		t.Fatalf("ingest: %+v %v", sum, err)
	}
	want := []string{"sandbox.lifecycle.created", "sandbox.lifecycle.paused", "sandbox.lifecycle.resumed", "sandbox.lifecycle.killed"}
	waitFor(t, "four deliveries", func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.types) == 4 })
	rc.mu.Lock()
	if len(rc.errs) > 0 || !equal(rc.types, want) {
		t.Fatalf("received %v, errors %v", rc.types, rc.errs)
	}
	rc.mu.Unlock()

	// Again: duplicates. Under another sandbox's id: MAC invalid.
	if sum, _ := p.Ingest(ctx, "sbx-1", ls...); sum.Rejected["duplicate"] != 4 {
		t.Fatalf("replay: %+v", sum)
	}
	if sum, _ := p.Ingest(ctx, "sbx-2", ls...); sum.Rejected["mac_invalid"] != 4 {
		t.Fatalf("other sandbox: %+v", sum)
	}
	if _, err := p.Ingest(ctx, "../x", ls...); !errors.Is(err, local.ErrInvalid) {
		t.Fatalf("bad id: %v", err)
	}

	evs, err := p.Events(ctx, local.Query{SandboxID: "sbx-1", Limit: 2, Order: local.Ascending})
	if err != nil || len(evs) != 2 || evs[0].Type != events.Created || evs[1].Type != events.Paused {
		t.Fatalf("events asc: %+v %v", evs, err)
	}
	evs, err = p.Events(ctx, local.Query{})
	if err != nil || len(evs) != 4 || evs[0].Type != events.Killed {
		t.Fatalf("events desc: %+v %v", evs, err)
	}
	if _, err := p.Events(ctx, local.Query{Limit: 101}); !errors.Is(err, local.ErrInvalid) {
		t.Fatalf("limit 101: %v", err)
	}
	// The receiver has its answer before the outcome is recorded.
	var ds []local.Delivery
	waitFor(t, "the recorded delivery", func() bool {
		ds, err = p.Deliveries(ctx, evs[0].EventID)
		return err == nil && len(ds) == 1 && ds[0].Outcome != "claimed"
	})
	if ds[0].Outcome != "delivered" || ds[0].Status != 200 || ds[0].Attempts != 1 {
		t.Fatalf("deliveries: %+v", ds)
	}
	hooks, _ := p.Webhooks(ctx)
	if len(hooks) != 1 || hooks[0].ID != w.ID {
		t.Fatalf("webhooks: %+v", hooks)
	}
	for _, name := range []string{"", "store.json", "webhook-secrets.json", "sandboxes.json"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Fatalf("%s: mode %v", name, perm)
		}
	}
	p.Close()
	if _, err := p.Ingest(ctx, "sbx-1", ls...); !errors.Is(err, local.ErrClosed) {
		t.Fatalf("after close: %v", err)
	}

	// The same directory without AllowLoopback: the registered loopback
	// webhook is never dialled; the delivery fails as blocked.
	before := rc.dials.Load()
	p2, err := local.New(local.Options{Dir: dir, StackKey: stackKey, ExtraRoots: rc.roots(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if _, _, err := p2.Register(ctx, local.Registration{URL: rc.srv.URL + "/hook"}); !errors.Is(err, events.ErrBlockedURL) || !errors.Is(err, local.ErrInvalid) {
		t.Fatalf("register loopback without AllowLoopback: %v", err)
	}
	l3 := lines(t, stackKey, "sbx-3")
	if sum, err := p2.Ingest(ctx, "sbx-3", l3[0]); err != nil || sum.Admitted != 1 {
		t.Fatalf("ingest: %+v %v", sum, err)
	}
	created, _ := p2.Events(ctx, local.Query{SandboxID: "sbx-3"})
	var got []local.Delivery
	waitFor(t, "the failed delivery", func() bool {
		got, _ = p2.Deliveries(ctx, created[0].EventID)
		return len(got) == 1 && got[0].Outcome == "failed"
	})
	if got[0].Reason != "blocked_address" || rc.dials.Load() != before {
		t.Fatalf("delivery %+v, %d connections", got[0], rc.dials.Load()-before)
	}
}

// TestRegisterChecks: secrets of at least 32 bytes, known types, URLs as
// the deliverer checks them.
func TestRegisterChecks(t *testing.T) {
	ctx := context.Background()
	p, err := local.New(local.Options{Dir: t.TempDir(), StackKey: bytes.Repeat([]byte{1}, 32), AllowLoopback: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, r := range []local.Registration{
		{URL: "https://hooks.example.com/x", Secret: "short"},
		{URL: "https://hooks.example.com/x", Types: []events.Type{"deleted"}},
		{URL: "http://hooks.example.com/x"},
		{URL: "https://10.0.0.1/x"},
		{URL: "https://localhost/x"},
		{URL: "https://169.254.169.254/latest"},
	} {
		if _, _, err := p.Register(ctx, r); !errors.Is(err, local.ErrInvalid) {
			t.Errorf("%+v: %v", r, err)
		}
	}
	w, s, err := p.Register(ctx, local.Registration{URL: "https://hooks.example.com/x", Secret: string(bytes.Repeat([]byte("k"), 32)), Types: []events.Type{events.Killed}})
	if err != nil || s != string(bytes.Repeat([]byte("k"), 32)) || len(w.Types) != 1 {
		t.Fatalf("%+v %v", w, err)
	}
	if err := p.DeleteWebhook(ctx, w.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.DeleteWebhook(ctx, w.ID); !errors.Is(err, local.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := local.New(local.Options{Dir: t.TempDir(), StackKey: []byte("short")}); !errors.Is(err, local.ErrInvalid) {
		t.Fatalf("short stack key: %v", err)
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestResumeAfterRestart: events admitted but not yet delivered when the
// pipeline closes are delivered, in order, by the next pipeline opened on
// the same directory; the delivery Close cut short stays failed and is
// not sent again.
func TestResumeAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "events")
	stackKey := bytes.Repeat([]byte{9}, 32)
	var (
		mu      sync.Mutex
		types   []string
		blocked = true
	)
	first := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		mu.Lock()
		block := blocked
		blocked = false
		mu.Unlock()
		if block {
			close(first)
			<-req.Context().Done() // until Close cuts the delivery
			return
		}
		var b struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(body, &b)
		mu.Lock()
		types = append(types, b.Type)
		mu.Unlock()
	}))
	srv.StartTLS()
	defer srv.Close()
	roots := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	opts := local.Options{Dir: dir, StackKey: stackKey, AllowLoopback: true, ExtraRoots: roots, Logger: quiet}
	p, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Register(ctx, local.Registration{URL: srv.URL + "/hook"}); err != nil {
		t.Fatal(err)
	}
	if sum, err := p.Ingest(ctx, "sbx-r", lines(t, stackKey, "sbx-r")...); err != nil || sum.Admitted != 4 {
		t.Fatalf("ingest: %+v, %v", sum, err)
	}
	<-first
	p.Close()
	mu.Lock()
	if len(types) != 0 {
		t.Fatalf("delivered before the restart: %v", types)
	}
	mu.Unlock()

	p2, err := local.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	waitFor(t, "three deliveries after the restart", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(types) >= 3
	})
	time.Sleep(100 * time.Millisecond) // nothing more comes
	mu.Lock()
	got := slices.Clone(types)
	mu.Unlock()
	if !equal(got, []string{"sandbox.lifecycle.paused", "sandbox.lifecycle.resumed", "sandbox.lifecycle.killed"}) {
		t.Fatalf("after the restart: %v", got)
	}
	evs, err := p2.Events(ctx, local.Query{SandboxID: "sbx-r", Order: local.Ascending})
	if err != nil || len(evs) != 4 {
		t.Fatalf("events: %v, %v", evs, err)
	}
	ds, err := p2.Deliveries(ctx, evs[0].EventID)
	if err != nil || len(ds) != 1 || ds[0].Outcome != "failed" {
		t.Fatalf("the cut delivery: %+v, %v", ds, err)
	}
}
