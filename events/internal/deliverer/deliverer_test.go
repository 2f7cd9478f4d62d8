package deliverer

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/rayito-dev/rayito/events/internal/store"
	"github.com/rayito-dev/rayito/proto/events"
)

// testPKI is a CA and a certificate for *.example.com signed by it.
type testPKI struct {
	pool *x509.CertPool
	cert tls.Certificate
}

var pki = sync.OnceValue(func() testPKI {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rayito test CA"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "hooks"}, DNSNames: []string{"*.example.com"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{pool: pool, cert: tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}
})

// receiver is an HTTPS server on 127.0.0.1 with the test certificate.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*received
}

type received struct {
	header http.Header
	body   []byte
	at     time.Time
}

func newReceiver(t *testing.T, h func(w http.ResponseWriter, r *received, n int)) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := &received{header: r.Header.Clone(), body: body, at: time.Now()}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, got)
		n := len(rc.reqs)
		rc.mu.Unlock()
		h(w, got, n)
	}))
	rc.TLS = &tls.Config{Certificates: []tls.Certificate{pki().cert}}
	rc.StartTLS()
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}

func (rc *receiver) got() []*received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]*received(nil), rc.reqs...)
}

// net maps public-looking names to public-looking addresses (resolver)
// and those addresses to loopback receivers (dialer). A dial of any
// address it does not map fails the test: no test dials anything but
// 127.0.0.1.
type fakeNet struct {
	t      *testing.T
	mu     sync.Mutex
	names  map[string][]netip.Addr
	routes map[netip.Addr]string // checked address -> 127.0.0.1:port
	dialed []netip.AddrPort
}

func newNet(t *testing.T) *fakeNet {
	return &fakeNet{t: t, names: map[string][]netip.Addr{}, routes: map[netip.Addr]string{}}
}

var nextPublic atomic.Uint32

// route gives name a fresh public address routed to rc.
func (n *fakeNet) route(name string, rc *receiver) {
	i := nextPublic.Add(1)
	a := netip.AddrFrom4([4]byte{93, 184, byte(i >> 8), byte(i)})
	n.mu.Lock()
	defer n.mu.Unlock()
	n.names[name] = []netip.Addr{a}
	n.routes[a] = rc.Listener.Addr().String()
}

func (n *fakeNet) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a, ok := n.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
}

func (n *fakeNet) dial(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
	n.mu.Lock()
	n.dialed = append(n.dialed, a)
	to, ok := n.routes[a.Addr()]
	n.mu.Unlock()
	if !ok {
		n.t.Errorf("dial of an unrouted address %s", a)
		return nil, errors.New("unrouted")
	}
	if a.Port() != 443 {
		n.t.Errorf("dial of port %d", a.Port())
	}
	if !strings.HasPrefix(to, "127.0.0.1:") {
		n.t.Fatalf("route to %s", to)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", to)
}

type secrets struct {
	mu    sync.Mutex
	vals  map[string]string
	reads int
}

func (s *secrets) Secret(_ context.Context, ref string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	v, ok := s.vals[ref]
	if !ok {
		return "", errors.New("no such secret")
	}
	return v, nil
}

func (s *secrets) set(ref, v string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.vals[ref] = v
}

type queue struct {
	mu   sync.Mutex
	msgs []Failure
}

func (q *queue) SendFailure(_ context.Context, f Failure) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.msgs = append(q.msgs, f)
	return nil
}

const secretA = "whsec-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

type env struct {
	d   *Deliverer
	st  *store.Memory
	net *fakeNet
	sec *secrets
	q   *queue
}

func newEnv(t *testing.T) *env {
	e := &env{st: store.NewMemory(), net: newNet(t), sec: &secrets{vals: map[string]string{}}, q: &queue{}}
	e.d = &Deliverer{
		Store: e.st, Secrets: e.sec, Queue: e.q, Resolver: e.net, Dial: e.net.dial, RootCAs: pki().pool,
		AttemptTimeout: 2 * time.Second, Backoff: func(int) time.Duration { return 0 },
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	return e
}

// hook registers a webhook at https://<name>/hook routed to rc.
func (e *env) hook(t *testing.T, id, name string, rc *receiver, secret string) {
	t.Helper()
	if rc != nil {
		e.net.route(name, rc)
	}
	ref := "rayito/webhooks/" + id
	e.sec.set(ref, secret)
	if err := e.st.PutWebhook(context.Background(), store.Webhook{WebhookID: id, URL: "https://" + name + "/hook", SecretRef: ref, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

var evSeq atomic.Uint32

func event(typ events.Type, gen uint64) events.Event {
	e := events.Event{EventID: fmt.Sprintf("%032x", evSeq.Add(1)), SandboxID: "sbx-1", Type: typ, Generation: gen, OccurredAtMs: time.Now().UnixMilli(), ImageARN: "arn:aws:lambda:us-east-1:123456789012:microvm-image/rayito-base", ExecutionID: "exec-1"}
	if typ == events.Killed {
		e.KillReason = events.KillTimeout
	}
	return e
}

func ok(w http.ResponseWriter, _ *received, _ int) { w.WriteHeader(http.StatusNoContent) }

func status(code int) func(http.ResponseWriter, *received, int) {
	return func(w http.ResponseWriter, _ *received, _ int) { w.WriteHeader(code) }
}

func outcome(t *testing.T, e *env, ev events.Event, hook string) store.Delivery {
	t.Helper()
	d, err := e.st.GetDelivery(context.Background(), ev.EventID, hook)
	if err != nil {
		t.Fatalf("delivery %s: %v", hook, err)
	}
	return d
}

// TestSignedDelivery: the body and headers a receiver gets, both
// signatures verified by events.VerifyWebhook on the receiving side, a
// replay older than 5 minutes refused, and the events of a sandbox in
// order.
func TestSignedDelivery(t *testing.T) {
	e := newEnv(t)
	var verr []error
	var mu sync.Mutex
	rc := newReceiver(t, func(w http.ResponseWriter, r *received, _ int) {
		err := events.VerifyWebhook(r.header, r.body, secretA, "wh-1", time.Now())
		if err == nil {
			err = events.VerifyE2BSignature(r.header, r.body, secretA)
		}
		mu.Lock()
		verr = append(verr, err)
		mu.Unlock()
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e.hook(t, "wh-1", "hooks.example.com", rc, secretA)
	evs := []events.Event{event(events.Created, 1), event(events.Paused, 2), event(events.Resumed, 3), event(events.Killed, 4)}
	sum, err := e.d.Deliver(context.Background(), evs)
	if err != nil || sum.Delivered != 4 {
		t.Fatalf("%+v %v", sum, err)
	}
	for _, err := range verr {
		if err != nil {
			t.Fatalf("receiver: %v", err)
		}
	}
	got := rc.got()
	if len(got) != 4 {
		t.Fatalf("%d requests", len(got))
	}
	deliveryIDs := map[string]bool{}
	for i, r := range got {
		var b map[string]any
		if err := json.Unmarshal(r.body, &b); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"event_id": evs[i].EventID, "sandbox_id": "sbx-1", "type": "sandbox.lifecycle." + string(evs[i].Type),
			"generation": float64(evs[i].Generation), "occurred_at_ms": float64(evs[i].OccurredAtMs),
			"template_id": evs[i].ImageARN, "execution_id": "exec-1",
		}
		if evs[i].Type == events.Killed {
			want["kill_reason"] = "timeout"
		}
		if fmt.Sprint(b) != fmt.Sprint(want) {
			t.Fatalf("body %d = %v, want %v", i, b, want)
		}
		h := r.header
		if h.Get("e2b-webhook-id") != "wh-1" || h.Get("e2b-signature-version") != "v1" || h.Get("Content-Type") != "application/json" {
			t.Fatalf("headers %v", h)
		}
		deliveryIDs[h.Get("e2b-delivery-id")] = true
		if h.Get("e2b-signature") != events.E2BSignature(secretA, r.body) {
			t.Fatal("e2b-signature")
		}
		// A replay of the same request 6 minutes later is refused.
		if err := events.VerifyWebhook(h, r.body, secretA, "wh-1", r.at.Add(6*time.Minute)); !errors.Is(err, events.ErrStale) {
			t.Fatalf("replay: %v", err)
		}
		if err := events.VerifyWebhook(h, r.body, "another-secret-another-secret-xx", "wh-1", r.at); err == nil {
			t.Fatal("wrong secret verified")
		}
	}
	if len(deliveryIDs) != 4 {
		t.Fatalf("delivery ids not fresh: %v", deliveryIDs)
	}
	if d := outcome(t, e, evs[3], "wh-1"); d.Outcome != store.Delivered || d.Attempts != 1 || d.Status != 200 {
		t.Fatalf("%+v", d)
	}
	// A second run of the same batch (a stream retry) delivers nothing.
	sum, err = e.d.Deliver(context.Background(), evs)
	if err != nil || sum.Skipped != 4 || rc.count() != 4 {
		t.Fatalf("retry %+v %v", sum, err)
	}
}

// TestRetryRules: 5xx retried up to 3 attempts, 4xx not, transport errors
// retried, a 5xx then 2xx delivered; failures reach the queue.
func TestRetryRules(t *testing.T) {
	e := newEnv(t)
	always500 := newReceiver(t, status(http.StatusBadGateway))
	once500 := newReceiver(t, func(w http.ResponseWriter, r *received, n int) {
		if n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	notFound := newReceiver(t, status(http.StatusNotFound))
	tooMany := newReceiver(t, status(http.StatusTooManyRequests))
	hangUp := newReceiver(t, func(w http.ResponseWriter, _ *received, _ int) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	})
	e.hook(t, "a500", "a500.example.com", always500, secretA)
	e.hook(t, "once", "once.example.com", once500, secretA)
	e.hook(t, "n404", "n404.example.com", notFound, secretA)
	e.hook(t, "n429", "n429.example.com", tooMany, secretA)
	e.hook(t, "hang", "hang.example.com", hangUp, secretA)
	ev := event(events.Created, 1)
	sum, err := e.d.Deliver(context.Background(), []events.Event{ev})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Delivered != 1 || sum.Failed != 4 {
		t.Fatalf("%+v", sum)
	}
	for _, c := range []struct {
		hook     string
		rc       *receiver
		outcome  store.Outcome
		attempts int
		status   int
		reason   string
	}{
		{"a500", always500, store.Failed, 3, 502, ReasonStatus},
		{"once", once500, store.Delivered, 2, 200, ""},
		{"n404", notFound, store.Failed, 1, 404, ReasonStatus},
		{"n429", tooMany, store.Failed, 1, 429, ReasonStatus},
		{"hang", hangUp, store.Failed, 3, 0, ReasonTransport},
	} {
		d := outcome(t, e, ev, c.hook)
		if d.Outcome != c.outcome || d.Attempts != c.attempts || d.Status != c.status || d.Reason != c.reason {
			t.Errorf("%s: %+v", c.hook, d)
		}
		if c.rc.count() != c.attempts {
			t.Errorf("%s: receiver saw %d requests, want %d", c.hook, c.rc.count(), c.attempts)
		}
	}
	if len(e.q.msgs) != 4 {
		t.Fatalf("queue %+v", e.q.msgs)
	}
	for _, m := range e.q.msgs {
		if m.EventID != ev.EventID || m.SandboxID != "sbx-1" || m.Type != "sandbox.lifecycle.created" || m.Reason == "" {
			t.Fatalf("queue message %+v", m)
		}
	}
}

// TestSlowReceiver: an attempt is cut at the attempt timeout (short here;
// TestDefaults checks the 10 s default), the slow webhook fails alone and
// the others are delivered meanwhile.
func TestSlowReceiver(t *testing.T) {
	e := newEnv(t)
	e.d.AttemptTimeout = 300 * time.Millisecond
	release := make(chan struct{})
	slow := newReceiver(t, func(w http.ResponseWriter, _ *received, _ int) {
		select {
		case <-release:
		case <-time.After(5 * time.Second):
		}
		w.WriteHeader(http.StatusOK)
	})
	defer close(release)
	fast := newReceiver(t, ok)
	e.hook(t, "slow", "slow.example.com", slow, secretA)
	e.hook(t, "fast", "fast.example.com", fast, secretA)
	ev := event(events.Created, 1)
	start := time.Now()
	sum, err := e.d.Deliver(context.Background(), []events.Event{ev})
	took := time.Since(start)
	if err != nil || sum.Delivered != 1 || sum.Failed != 1 {
		t.Fatalf("%+v %v", sum, err)
	}
	if d := outcome(t, e, ev, "slow"); d.Reason != ReasonTransport || d.Attempts != 3 {
		t.Fatalf("slow %+v", d)
	}
	if took > 3*time.Second {
		t.Fatalf("took %v: attempts not cut at 300 ms", took)
	}
}

func TestDefaults(t *testing.T) {
	var d Deliverer
	if d.attemptTimeout() != 10*time.Second || d.maxAttempts() != 3 || d.secretTTL() != 300*time.Second || MaxResponseBytes != 64<<10 {
		t.Fatal("defaults")
	}
	d.SecretTTL = time.Hour
	if d.secretTTL() != 300*time.Second {
		t.Fatal("secret cache longer than 300 s")
	}
}

// TestRedirectNotFollowed: a 302 is the outcome; its Location is never
// requested.
func TestRedirectNotFollowed(t *testing.T) {
	e := newEnv(t)
	target := newReceiver(t, ok)
	e.net.route("target.example.com", target)
	redirect := newReceiver(t, func(w http.ResponseWriter, _ *received, _ int) {
		w.Header().Set("Location", "https://target.example.com/hook")
		w.WriteHeader(http.StatusFound)
	})
	e.hook(t, "r", "redirect.example.com", redirect, secretA)
	ev := event(events.Created, 1)
	if _, err := e.d.Deliver(context.Background(), []events.Event{ev}); err != nil {
		t.Fatal(err)
	}
	if d := outcome(t, e, ev, "r"); d.Outcome != store.Failed || d.Reason != ReasonRedirect || d.Attempts != 1 || d.Status != 302 {
		t.Fatalf("%+v", d)
	}
	if target.count() != 0 {
		t.Fatal("redirect followed")
	}
}

// TestBrokenURLIsolated: a bad URL, an unresolvable name and a missing
// secret fail alone; the good webhook gets every event.
func TestBrokenURLIsolated(t *testing.T) {
	e := newEnv(t)
	good := newReceiver(t, ok)
	e.hook(t, "good", "good.example.com", good, secretA)
	e.hook(t, "nodns", "nowhere.example.com", nil, secretA)
	ctx := context.Background()
	for id, u := range map[string]string{"http": "http://good.example.com/hook", "creds": "https://u:p@good.example.com/hook", "garbage": "::::"} {
		if err := e.st.PutWebhook(ctx, store.Webhook{WebhookID: id, URL: u, SecretRef: "rayito/webhooks/good"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.PutWebhook(ctx, store.Webhook{WebhookID: "nosecret", URL: "https://good.example.com/hook", SecretRef: "rayito/webhooks/missing"}); err != nil {
		t.Fatal(err)
	}
	evs := []events.Event{event(events.Created, 1), event(events.Killed, 2)}
	sum, err := e.d.Deliver(ctx, evs)
	if err != nil || sum.Delivered != 2 || sum.Failed != 10 {
		t.Fatalf("%+v %v", sum, err)
	}
	if good.count() != 2 {
		t.Fatalf("good got %d", good.count())
	}
	for hook, reason := range map[string]string{"http": ReasonBadURL, "creds": ReasonBadURL, "garbage": ReasonBadURL, "nodns": ReasonResolve, "nosecret": ReasonSecret} {
		if d := outcome(t, e, evs[1], hook); d.Reason != reason || d.Attempts != 0 {
			t.Errorf("%s: %+v", hook, d)
		}
	}
}

// TestSecretRotation: a cached secret is used until the receiver answers
// 401; then it is read again once and the delivery goes through. A
// receiver that keeps refusing gets no second re-read.
func TestSecretRotation(t *testing.T) {
	e := newEnv(t)
	var want atomic.Value
	want.Store(secretA)
	rc := newReceiver(t, func(w http.ResponseWriter, r *received, _ int) {
		if events.VerifyWebhook(r.header, r.body, want.Load().(string), "rot", time.Now()) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e.hook(t, "rot", "rot.example.com", rc, secretA)
	ctx := context.Background()
	if s, _ := e.d.Deliver(ctx, []events.Event{event(events.Created, 1)}); s.Delivered != 1 {
		t.Fatalf("%+v", s)
	}
	if s, _ := e.d.Deliver(ctx, []events.Event{event(events.Paused, 2)}); s.Delivered != 1 || e.sec.reads != 1 {
		t.Fatalf("%+v reads %d (cached secret not used)", s, e.sec.reads)
	}
	const secretB = "whsec-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	e.sec.set("rayito/webhooks/rot", secretB)
	want.Store(secretB)
	ev := event(events.Resumed, 3)
	if s, _ := e.d.Deliver(ctx, []events.Event{ev}); s.Delivered != 1 {
		t.Fatalf("%+v", s)
	}
	if d := outcome(t, e, ev, "rot"); d.Attempts != 2 || e.sec.reads != 2 {
		t.Fatalf("%+v reads %d", d, e.sec.reads)
	}
	want.Store("nobody-has-this-secret-nobody-has-this")
	ev = event(events.Killed, 4)
	if s, _ := e.d.Deliver(ctx, []events.Event{ev}); s.Failed != 1 {
		t.Fatalf("%+v", s)
	}
	if d := outcome(t, e, ev, "rot"); d.Attempts != 2 || d.Status != 401 || e.sec.reads != 3 {
		t.Fatalf("%+v reads %d", d, e.sec.reads)
	}
}

// TestSecretCacheExpiry: past the cache's age the secret is read again.
func TestSecretCacheExpiry(t *testing.T) {
	e := newEnv(t)
	now := time.Now()
	e.d.Now = func() time.Time { return now }
	rc := newReceiver(t, ok)
	e.hook(t, "c", "c.example.com", rc, secretA)
	ctx := context.Background()
	e.d.Deliver(ctx, []events.Event{event(events.Created, 1)})
	now = now.Add(299 * time.Second)
	e.d.Deliver(ctx, []events.Event{event(events.Paused, 2)})
	if e.sec.reads != 1 {
		t.Fatalf("reads %d", e.sec.reads)
	}
	now = now.Add(2 * time.Second)
	e.d.Deliver(ctx, []events.Event{event(events.Resumed, 3)})
	if e.sec.reads != 2 {
		t.Fatalf("reads %d", e.sec.reads)
	}
}

// TestSSRF: names resolving to blocked addresses (any one of them) and
// blocked literals are refused before any dial.
func TestSSRF(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	blocked := map[string][]string{
		"loop.example.com":    {"127.0.0.1"},
		"rfc1918.example.com": {"10.1.2.3"},
		"imds.example.com":    {"169.254.169.254"},
		"cgnat.example.com":   {"100.64.0.1"},
		"mapped.example.com":  {"::ffff:127.0.0.1"},
		"v6loop.example.com":  {"::1"},
		"ula.example.com":     {"fd00::1"},
		"mixed.example.com":   {"93.184.216.34", "192.168.1.1"},
		"bench.example.com":   {"198.18.0.1"},
		"zero.example.com":    {"0.0.0.0"},
		"nat64.example.com":   {"64:ff9b::a00:1"},
	}
	for name, addrs := range blocked {
		var as []netip.Addr
		for _, a := range addrs {
			as = append(as, netip.MustParseAddr(a))
		}
		e.net.names[name] = as
		id := strings.Split(name, ".")[0]
		e.hook(t, id, name, nil, secretA)
	}
	for id, u := range map[string]string{"lit-loop": "https://127.0.0.1/hook", "lit-dec": "https://2130706433/hook", "lit-v6": "https://[::1]/hook", "lit-imds": "https://169.254.169.254/latest"} {
		e.st.PutWebhook(ctx, store.Webhook{WebhookID: id, URL: u, SecretRef: "rayito/webhooks/x"})
	}
	ev := event(events.Created, 1)
	sum, err := e.d.Deliver(ctx, []events.Event{ev})
	if err != nil || sum.Failed != len(blocked)+4 || sum.Delivered != 0 {
		t.Fatalf("%+v %v", sum, err)
	}
	hooks, _ := e.st.ListWebhooks(ctx)
	for _, w := range hooks {
		if d := outcome(t, e, ev, w.WebhookID); d.Reason != ReasonBlockedAddress || d.Attempts != 0 {
			t.Errorf("%s: %+v", w.WebhookID, d)
		}
	}
	if len(e.net.dialed) != 0 {
		t.Fatalf("dialed %v", e.net.dialed)
	}
}

// TestHandleStream: only INSERTs of event items are delivered; other
// items and shapes are ignored without a panic.
func TestHandleStream(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, ok)
	e.hook(t, "s", "s.example.com", rc, secretA)
	ev := event(events.Created, 1)
	img := map[string]lambdaevents.DynamoDBAttributeValue{
		"kind": lambdaevents.NewStringAttribute("event"), "event_id": lambdaevents.NewStringAttribute(ev.EventID),
		"sandbox_id": lambdaevents.NewStringAttribute(ev.SandboxID), "type": lambdaevents.NewStringAttribute("created"),
		"generation": lambdaevents.NewNumberAttribute("1"), "occurred_at_ms": lambdaevents.NewNumberAttribute(fmt.Sprint(ev.OccurredAtMs)),
		"image_arn": lambdaevents.NewStringAttribute(ev.ImageARN), "execution_id": lambdaevents.NewStringAttribute("exec-1"),
	}
	bad := map[string]lambdaevents.DynamoDBAttributeValue{"kind": lambdaevents.NewStringAttribute("event"), "event_id": lambdaevents.NewNumberAttribute("1"), "generation": lambdaevents.NewStringAttribute("x")}
	state := map[string]lambdaevents.DynamoDBAttributeValue{"kind": lambdaevents.NewStringAttribute("sandbox")}
	batch := lambdaevents.DynamoDBEvent{Records: []lambdaevents.DynamoDBEventRecord{
		{EventName: "INSERT", Change: lambdaevents.DynamoDBStreamRecord{NewImage: state}},
		{EventName: "INSERT", Change: lambdaevents.DynamoDBStreamRecord{NewImage: bad}},
		{EventName: "MODIFY", Change: lambdaevents.DynamoDBStreamRecord{NewImage: img}},
		{EventName: "INSERT", Change: lambdaevents.DynamoDBStreamRecord{NewImage: img}},
	}}
	sum, err := e.d.Handle(context.Background(), batch)
	if err != nil || sum.Events != 1 || sum.Delivered != 1 || rc.count() != 1 {
		t.Fatalf("%+v %v", sum, err)
	}
}

// TestResponseReadBounded: at most 64 KiB of an answer is read; a receiver
// that sends 32 MiB sees its connection closed before it is done.
func TestResponseReadBounded(t *testing.T) {
	e := newEnv(t)
	var written atomic.Int64
	var writeErr atomic.Bool
	big := newReceiver(t, func(w http.ResponseWriter, _ *received, _ int) {
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 64<<10)
		for i := 0; i < 512; i++ {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				writeErr.Store(true)
				return
			}
		}
	})
	e.hook(t, "big", "big.example.com", big, secretA)
	ev := event(events.Created, 1)
	if s, err := e.d.Deliver(context.Background(), []events.Event{ev}); err != nil || s.Delivered != 1 {
		t.Fatalf("%+v %v", s, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !writeErr.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !writeErr.Load() || written.Load() >= 32<<20 {
		t.Fatalf("the receiver wrote %d bytes without error: the answer was read whole", written.Load())
	}
}

// TestDeadline: with less time left than one delivery can take, nothing
// is claimed and the batch fails for a retry; a claim a dead deliverer left
// open is taken over past ClaimTimeout.
func TestDeadline(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, ok)
	e.hook(t, "d", "d.example.com", rc, secretA)
	ev := event(events.Created, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := e.d.Deliver(ctx, []events.Event{ev}); !errors.Is(err, ErrOutOfTime) {
		t.Fatalf("%v", err)
	}
	if _, err := e.st.GetDelivery(context.Background(), ev.EventID, "d"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claimed anyway: %v", err)
	}
	// A deliverer died after claiming: the retry within ClaimTimeout
	// skips it, a later one delivers.
	now := time.Now()
	e.d.Now = func() time.Time { return now }
	if err := e.st.Claim(context.Background(), ev.EventID, "d", now, now.Add(-ClaimTimeout)); err != nil {
		t.Fatal(err)
	}
	if s, _ := e.d.Deliver(context.Background(), []events.Event{ev}); s.Skipped != 1 {
		t.Fatalf("%+v", s)
	}
	now = now.Add(ClaimTimeout + time.Second)
	if s, _ := e.d.Deliver(context.Background(), []events.Event{ev}); s.Delivered != 1 || rc.count() != 1 {
		t.Fatalf("%+v", s)
	}
	if b := (&Deliverer{}).budget(); b != 10*time.Second+3*10*time.Second+600*time.Millisecond+time.Second || b >= ClaimTimeout {
		t.Fatalf("budget %v", b)
	}
}

// TestNoHistoryForNewWebhooks: a webhook gets the events that occurred
// after its registration (less 5 minutes of clock skew), never older
// ones: a platform that delivers a backlog late does not send a new
// webhook what happened before it existed.
func TestNoHistoryForNewWebhooks(t *testing.T) {
	e := newEnv(t)
	rc := newReceiver(t, ok)
	e.hook(t, "wh-1", "a.example.com", rc, secretA)
	old := event(events.Created, 1)
	old.OccurredAtMs = time.Now().Add(-6 * time.Minute).UnixMilli()
	skewed := event(events.Paused, 2)
	skewed.OccurredAtMs = time.Now().Add(-4 * time.Minute).UnixMilli()
	sum, err := e.d.Deliver(context.Background(), []events.Event{old, skewed})
	if err != nil || sum.Delivered != 1 || rc.count() != 1 {
		t.Fatalf("delivered %+v (%d requests), %v; want only the event within the skew", sum, rc.count(), err)
	}
	if _, err := e.st.GetDelivery(context.Background(), old.EventID, "wh-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the older event was claimed: %v", err)
	}
}
