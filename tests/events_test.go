package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	evlocal "github.com/rayito-dev/rayito/events/local"
	"github.com/rayito-dev/rayito/localvm"
	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/proto/localplatform"
	rayito "github.com/rayito-dev/rayito/sdk"
	"github.com/rayito-dev/rayito/sdk/webhook"
)

// hookReceiver is an HTTPS receiver on 127.0.0.1 that checks both
// signatures of every delivery, as an E2B receiver (e2b-signature
// recomputed) and as a Rayito one (webhook.Verify).
type hookReceiver struct {
	srv   *httptest.Server
	conns atomic.Int32

	mu         sync.Mutex
	secret, id string
	got        []delivery
	errs       []string
}

type delivery struct {
	header http.Header
	body   []byte
	event  webhook.Event
}

func newHookReceiver(t *testing.T) *hookReceiver {
	r := &hookReceiver{}
	r.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 64<<10))
		r.mu.Lock()
		defer r.mu.Unlock()
		if e2b := req.Header.Get("e2b-signature"); e2b != events.E2BSignature(r.secret, body) {
			r.errs = append(r.errs, "e2b-signature does not match sha256(secret||body)")
		}
		if err := webhook.VerifyE2B(req.Header, body, r.secret, time.Now()); err != nil {
			r.errs = append(r.errs, "VerifyE2B: "+err.Error())
		}
		if req.Header.Get("e2b-webhook-id") != r.id || req.Header.Get("e2b-signature-version") != "v1" || req.Header.Get("e2b-delivery-id") == "" {
			r.errs = append(r.errs, "E2B headers missing")
		}
		if err := webhook.Verify(req.Header, body, r.secret, r.id, time.Now()); err != nil {
			r.errs = append(r.errs, "rayito-signature: "+err.Error())
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev webhook.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			r.errs = append(r.errs, "body: "+err.Error())
		}
		r.got = append(r.got, delivery{header: req.Header.Clone(), body: body, event: ev})
		w.WriteHeader(http.StatusNoContent)
	}))
	r.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.conns.Add(1)
		}
	}
	r.srv.StartTLS()
	t.Cleanup(r.srv.Close)
	return r
}

func (r *hookReceiver) ca() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
}

func (r *hookReceiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// TestLifecycleWebhooks is issue 29's end-to-end local run: a root
// platform with EventsAllowLoopback and the receiver's CA; a webhook on
// 127.0.0.1 registered through the SDK; create (WithEvents), pause,
// resume, kill deliver created, paused, resumed, killed{request} in that
// order, each accepted by an E2B-style check of e2b-signature
// (webhook.VerifyE2B) and by webhook.Verify; a delivery replayed more than
// 5 minutes later is refused by both (ErrStale); GetEvents lists the four. Then the same state dir
// without EventsAllowLoopback: the loopback webhook is never dialled and
// the delivery is recorded as failed (blocked_address); registering a
// loopback URL is refused. Another user gets 403 from every events route.
func TestLifecycleWebhooks(t *testing.T) {
	if !isRoot() {
		t.Skip("needs root: pause and resume freeze the sandbox's cgroup, and rayd must not share its uid with the sandbox's code to hold an events key")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rc := newHookReceiver(t)
	state := t.TempDir()
	p := startPlatform(t, state, func(o *localvm.Options) {
		o.EventsAllowLoopback = true
		o.EventsRootCAs = rc.ca()
	})
	stopped := false
	defer func() {
		if !stopped {
			p.stop(true)
		}
	}()

	hook, secret, err := rayito.RegisterWebhook(ctx, rayito.WebhookRegistration{URL: rc.srv.URL + "/hook"}, p.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(secret) < 32 || !strings.HasPrefix(hook.URL, "https://127.0.0.1:") {
		t.Fatalf("webhook %+v, secret of %d bytes", hook, len(secret))
	}
	rc.mu.Lock()
	rc.secret, rc.id = secret, hook.ID
	rc.mu.Unlock()
	if hooks, err := rayito.ListWebhooks(ctx, p.opts()...); err != nil || len(hooks) != 1 || hooks[0].ID != hook.ID {
		t.Fatalf("ListWebhooks: %+v %v", hooks, err)
	}

	sbx, err := rayito.Create(ctx, p.opts(rayito.WithEvents(rayito.LifecycleEvents{}))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := sbx.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sbx.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sbx.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"sandbox.lifecycle.created", "sandbox.lifecycle.paused", "sandbox.lifecycle.resumed", "sandbox.lifecycle.killed"}
	deadline := time.Now().Add(30 * time.Second)
	for len(rc.deliveries()) < 4 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	got := rc.deliveries()
	rc.mu.Lock()
	errs := rc.errs
	rc.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("receiver: %v", errs)
	}
	if len(got) != 4 {
		evs, _ := rayito.GetEvents(ctx, rayito.EventsQuery{SandboxID: sbx.ID(), Order: "asc"}, p.opts()...)
		for _, d := range got {
			t.Logf("delivered %s", d.event.Type)
		}
		for _, e := range evs {
			t.Logf("stored %s %d", e.Type, e.Generation)
		}
		if b, err := os.ReadFile(localvm.LogPath(state, sbx.ID())); err == nil {
			t.Logf("rayd.log: %d event lines; tail: %q", strings.Count(string(b), events.LinePrefix), tailOf(string(b), 600))
		} else {
			t.Logf("rayd.log: %v", err)
		}
		t.Fatalf("%d deliveries, want 4", len(got))
	}
	for i, d := range got {
		if d.event.Type != want[i] || d.event.SandboxID != sbx.ID() || d.event.Generation != uint64(i+1) {
			t.Errorf("delivery %d: %+v, want %s of %s", i, d.event, want[i], sbx.ID())
		}
	}
	if got[3].event.KillReason != "request" {
		t.Errorf("killed: kill_reason %q, want request", got[3].event.KillReason)
	}
	// A replay of a delivery, more than 5 minutes later: both receivers
	// refuse it (the E2B one by the signed body's occurred_at_ms).
	later := time.Now().Add(5*time.Minute + time.Second)
	if err := webhook.Verify(got[0].header, got[0].body, secret, hook.ID, later); !errors.Is(err, webhook.ErrStale) {
		t.Fatalf("replay after 5 minutes: %v, want ErrStale", err)
	}
	if err := webhook.VerifyE2B(got[0].header, got[0].body, secret, later); !errors.Is(err, webhook.ErrStale) {
		t.Fatalf("replay after 5 minutes to an E2B receiver: %v, want ErrStale", err)
	}
	evs, err := rayito.GetEvents(ctx, rayito.EventsQuery{SandboxID: sbx.ID(), Order: "asc"}, p.opts()...)
	if err != nil || len(evs) != 4 || evs[0].Type != rayito.EventCreated || evs[3].Type != rayito.EventKilled {
		t.Fatalf("GetEvents: %+v %v", evs, err)
	}

	// Another user: 403 on every events route.
	strangerRefused(t, p.endpoint, sbx.ID(), hook.ID)

	// The same platform state without AllowLoopback.
	p.stop(true)
	stopped = true
	before := rc.conns.Load()
	p2 := startPlatform(t, state, func(o *localvm.Options) { o.EventsRootCAs = rc.ca() })
	if _, _, err := rayito.RegisterWebhook(ctx, rayito.WebhookRegistration{URL: rc.srv.URL + "/other"}, p2.opts()...); !errors.Is(err, rayito.ErrInvalidArgument) {
		p2.stop(true)
		t.Fatalf("loopback webhook without AllowLoopback: %v", err)
	}
	sbx2, err := rayito.Create(ctx, p2.opts(rayito.WithEvents(rayito.LifecycleEvents{}))...)
	if err != nil {
		p2.stop(true)
		t.Fatal(err)
	}
	var created rayito.LifecycleEvent
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		evs, err := rayito.GetEvents(ctx, rayito.EventsQuery{SandboxID: sbx2.ID()}, p2.opts()...)
		if err == nil && len(evs) == 1 {
			created = evs[0]
			break
		}
	}
	_ = sbx2.Kill(ctx)
	time.Sleep(time.Second) // the deliveries of created and killed are attempted
	p2.stop(true)
	if created.EventID == "" {
		t.Fatal("no created event without AllowLoopback")
	}
	if n := rc.conns.Load() - before; n != 0 {
		t.Fatalf("the loopback receiver got %d connections without AllowLoopback", n)
	}
	pl, err := evlocal.New(evlocal.Options{Dir: filepath.Join(state, "events"), StackKey: bytes.Repeat([]byte{1}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	ds, err := pl.Deliveries(ctx, created.EventID)
	if err != nil || len(ds) != 1 || ds[0].Outcome != "failed" || ds[0].Reason != "blocked_address" || ds[0].Attempts != 0 {
		t.Fatalf("the delivery without AllowLoopback: %+v %v", ds, err)
	}
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// strangerRefused: another user of the machine gets 403 from every events
// route of root's platform.
func strangerRefused(t *testing.T, endpoint, sandboxID, webhookID string) {
	t.Helper()
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Log("curl is not installed: the stranger check is skipped")
		return
	}
	u := newOrdinaryUser(t)
	for _, c := range [][]string{
		{"GET", localplatform.EventsPath},
		{"GET", localplatform.EventsSandboxKeyPath + "?sandbox=" + sandboxID},
		{"GET", localplatform.EventsWebhooksPath},
		{"POST", localplatform.EventsWebhooksPath},
		{"DELETE", localplatform.EventsWebhooksPath + "/" + webhookID},
	} {
		args := []string{"-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", c[0], endpoint + c[1]}
		if c[0] == "POST" {
			args = append(args, "-H", "content-type: application/json", "-d", `{"url":"https://hooks.example.com/x"}`)
		}
		cmd := exec.Command(curl, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.uid, Gid: u.gid}}
		var out bytes.Buffer
		cmd.Stdout = &out
		_ = cmd.Run()
		if out.String() != "403" {
			t.Errorf("%s %s as another user: %q, want 403", c[0], c[1], out.String())
		}
	}
}
