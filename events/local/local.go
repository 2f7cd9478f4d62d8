// Package local runs the events-webhooks pipeline in one process, for the
// local platform: the same admission of signed lifecycle event lines as
// the stack's forwarder Lambda and the same webhook delivery as its
// deliverer Lambda, over a store kept in files of a directory instead of
// DynamoDB, and webhook secrets kept beside it instead of Secrets
// Manager.
//
// A [Pipeline] is fed rayd's lines with the id of the sandbox whose
// stdout they came from ([Pipeline.Ingest]); the id the line claims must
// match it and its MAC must verify with that sandbox's key, derived from
// the stack key ([Pipeline.SandboxKey]). An admitted event is delivered,
// in the background, to every registered webhook that wants its type
// ([Pipeline.Register]): https only, every resolved address checked
// against events.BlockedAddr, signed with both e2b-signature and
// rayito-signature. [Options.AllowLoopback] lets a receiver on this
// machine's loopback in (a literal 127.0.0.0/8 or ::1 address in the URL);
// every other blocked address stays blocked.
//
// Nothing is logged but counts: never a line, a key, a URL, a secret or
// a body.
package local

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/rayito-dev/rayito/events/internal/deliverer"
	"github.com/rayito-dev/rayito/events/internal/forwarder"
	"github.com/rayito-dev/rayito/events/internal/store"
	"github.com/rayito-dev/rayito/proto/events"
)

// Limits.
const (
	// MinSecretLen is the shortest webhook secret Register accepts.
	MinSecretLen = events.MinWebhookSecretLen
	// MaxSecretLen is the longest.
	MaxSecretLen = events.MaxWebhookSecretLen
	// MaxWebhooks bounds the registry.
	MaxWebhooks = events.MaxWebhooks
	// MaxLimit bounds a query (and is its default).
	MaxLimit = 100
	// MinStackKeyLen is the shortest stack key New accepts.
	MinStackKeyLen = 32
)

// Errors (use errors.Is). A URL Register refuses also matches
// events.ErrInvalidURL or events.ErrBlockedURL.
var (
	ErrInvalid  = errors.New("events/local: invalid argument")
	ErrNotFound = errors.New("events/local: not found")
	ErrClosed   = errors.New("events/local: pipeline closed")
)

// Order of a query's events.
type Order string

// Orders.
const (
	Ascending  Order = "asc"
	Descending Order = "desc"
)

// Options configure New.
type Options struct {
	// Dir holds the store and the webhook secrets; created 0700 when
	// absent (and made 0700 when present). Required.
	Dir string
	// StackKey derives every sandbox's key; at least 32 bytes.
	StackKey []byte
	// AllowLoopback lets webhooks target loopback addresses (literal
	// 127.0.0.0/8 and ::1 in the URL, and names resolving there). Every
	// other blocked address class stays blocked. Off by default.
	AllowLoopback bool
	// ExtraRoots are PEM certificates trusted for webhook TLS on top of
	// the system's roots (a local receiver's private CA).
	ExtraRoots []byte
	// Logger receives the summaries (counts only); slog.Default when nil.
	Logger *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Webhook is a registered receiver, without its secret.
type Webhook struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Types empty: every type.
	Types     []events.Type `json:"types,omitempty"`
	CreatedAt time.Time     `json:"created_at"`
}

// Registration is what Register takes.
type Registration struct {
	URL string
	// Secret signs the deliveries; MinSecretLen to MaxSecretLen bytes.
	// Empty: 32 random bytes are generated (hex-encoded).
	Secret string
	// Types restricts the webhook to these types; empty: all.
	Types []events.Type
}

// Query selects events.
type Query struct {
	// SandboxID: one sandbox's events; empty: every sandbox's.
	SandboxID string
	// Limit is 1 to MaxLimit; 0 means MaxLimit.
	Limit int
	// Order by occurrence; default Descending (newest first).
	Order Order
}

// Summary counts what one Ingest admitted and refused (reasons as the
// forwarder's: mac_invalid, sandbox_mismatch, malformed_line, stale_event,
// future_event, duplicate, invalid_transition, rate_limited).
type Summary struct {
	Lines    int            `json:"lines"`
	Ignored  int            `json:"ignored"`
	Admitted int            `json:"admitted"`
	Rejected map[string]int `json:"rejected,omitempty"`
}

// Delivery is the outcome of one (event, webhook) delivery.
type Delivery struct {
	EventID   string `json:"event_id"`
	WebhookID string `json:"webhook_id"`
	// Outcome: claimed (in progress), delivered, failed.
	Outcome  string `json:"outcome"`
	Attempts int    `json:"attempts"`
	Status   int    `json:"status,omitempty"`
	// Reason of a failure: bad_url, blocked_address, resolve_failed,
	// status, redirect, transport, secret_unavailable.
	Reason    string    `json:"reason,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Pipeline is the in-process pipeline; its methods are safe for
// concurrent use.
type Pipeline struct {
	dir      string
	stackKey []byte
	allow    func(netip.Addr) bool
	log      *slog.Logger
	now      func() time.Time
	st       *recStore
	fw       *forwarder.Forwarder
	dl       *deliverer.Deliverer
	secrets  *secretFile

	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	pending []events.Event
	closed  bool
}

// File names in Dir.
const (
	storeFile   = "store.json"
	secretsFile = "webhook-secrets.json"
	indexFile   = "sandboxes.json"
)

// New opens (or creates) the pipeline in opts.Dir and starts its delivery
// loop; Close stops it.
func New(opts Options) (*Pipeline, error) {
	if opts.Dir == "" {
		return nil, fmt.Errorf("%w: a directory is required", ErrInvalid)
	}
	if len(opts.StackKey) < MinStackKeyLen {
		return nil, fmt.Errorf("%w: the stack key is shorter than %d bytes", ErrInvalid, MinStackKeyLen)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("events/local: %w", err)
	}
	if err := os.Chmod(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("events/local: %w", err)
	}
	var roots *x509.CertPool
	if len(opts.ExtraRoots) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(opts.ExtraRoots) {
			return nil, fmt.Errorf("%w: the extra roots hold no PEM certificate", ErrInvalid)
		}
		roots = pool
	}
	mem, err := store.NewFile(filepath.Join(opts.Dir, storeFile))
	if err != nil {
		return nil, fmt.Errorf("events/local: %w", err)
	}
	sec, err := openSecrets(filepath.Join(opts.Dir, secretsFile))
	if err != nil {
		return nil, err
	}
	idx, err := openIndex(filepath.Join(opts.Dir, indexFile))
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	p := &Pipeline{
		dir: opts.Dir, stackKey: slices.Clone(opts.StackKey), log: logger, now: now, secrets: sec,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	if opts.AllowLoopback {
		p.allow = func(a netip.Addr) bool { return a.Unmap().IsLoopback() }
	}
	p.st = &recStore{Memory: mem, index: idx, onEvent: p.enqueue}
	p.fw = &forwarder.Forwarder{Keys: stackKey(p.stackKey), Store: p.st, Now: now, Log: logger}
	p.dl = &deliverer.Deliverer{Store: p.st, Secrets: sec, RootCAs: roots, AllowAddr: p.allow, Now: now, Log: logger}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.sweep()
	if err := p.resume(p.ctx); err != nil {
		return nil, err
	}
	go p.loop()
	return p, nil
}

// SweepEvery is how often the pipeline removes what has outlived the
// store's TTL (7 days, as the table's TTL on AWS).
const SweepEvery = time.Hour

// sweep removes expired events, claims and killed sandboxes' state, and
// forgets sandboxes left without events.
func (p *Pipeline) sweep() {
	n, err := p.st.Expire(p.now())
	if err != nil {
		p.log.Warn("events: the expiry sweep could not save the store")
		return
	}
	if n == 0 {
		return
	}
	ctx := context.Background()
	if err := p.st.index.keep(func(id string) bool {
		evs, err := p.st.ListEvents(ctx, id, 1)
		return err != nil || len(evs) > 0
	}); err != nil {
		p.log.Warn("events: the expiry sweep could not save the sandbox index")
	}
	p.log.Debug("events: expired", slog.Int("events", n))
}

// resume queues what an earlier run admitted and did not finish
// delivering: events of the forwarder's 24-hour window that a webhook
// receives (Webhook.Receives) and has no delivery for. A delivery cut by
// a crash stays claimed for deliverer.ClaimTimeout and is then taken
// over by the next delivery of that pair, not by resume; one cut by Close
// is recorded as failed.
func (p *Pipeline) resume(ctx context.Context) error {
	hooks, err := p.st.ListWebhooks(ctx)
	if err != nil || len(hooks) == 0 {
		return err
	}
	cut := p.now().Add(-forwarder.MaxAge).UnixMilli()
	var todo []events.Event
	for _, id := range p.st.index.ids() {
		evs, err := p.st.ListEvents(ctx, id, 0)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.OccurredAtMs < cut {
				continue
			}
			for _, w := range hooks {
				if !w.Receives(ev) {
					continue
				}
				if _, err := p.st.GetDelivery(ctx, ev.EventID, w.WebhookID); errors.Is(err, store.ErrNotFound) {
					todo = append(todo, ev)
					break
				}
			}
		}
	}
	sort.SliceStable(todo, func(i, j int) bool {
		a, b := todo[i], todo[j]
		if a.SandboxID == b.SandboxID {
			return a.Generation < b.Generation
		}
		return a.OccurredAtMs < b.OccurredAtMs
	})
	p.mu.Lock()
	p.pending = append(todo, p.pending...)
	p.mu.Unlock()
	if len(todo) > 0 {
		p.wake <- struct{}{}
	}
	return nil
}

// SandboxKey is the key of sandboxID's rayd (events.SandboxKey of the
// stack key): hand it to that sandbox only.
func (p *Pipeline) SandboxKey(sandboxID string) ([]byte, error) {
	if !validSandboxID(sandboxID) {
		return nil, fmt.Errorf("%w: sandbox id", ErrInvalid)
	}
	return events.SandboxKey(p.stackKey, sandboxID), nil
}

func validSandboxID(id string) bool {
	got, ok := forwarder.SandboxFromStream(id)
	return ok && got == id
}

// Ingest admits lines of sandboxID's rayd stdout: lines without the
// rayito.event.v1 prefix are ignored, the others go through the
// forwarder's admission with sandboxID (the one the caller knows, never
// the one a line claims). Admitted events are queued for delivery. An
// error means the store failed (the lines may be given again: admitted
// ones then count as duplicates).
func (p *Pipeline) Ingest(ctx context.Context, sandboxID string, lines ...string) (Summary, error) {
	if !validSandboxID(sandboxID) {
		return Summary{}, fmt.Errorf("%w: sandbox id", ErrInvalid)
	}
	if p.isClosed() {
		return Summary{}, ErrClosed
	}
	data := lambdaevents.CloudwatchLogsData{MessageType: "DATA_MESSAGE", LogStream: sandboxID}
	for _, l := range lines {
		data.LogEvents = append(data.LogEvents, lambdaevents.CloudwatchLogsLogEvent{Message: l})
	}
	s, err := p.fw.Process(ctx, data)
	out := Summary{Lines: s.Lines, Ignored: s.Ignored, Admitted: s.Admitted}
	if len(s.Rejected) > 0 {
		out.Rejected = s.Rejected
	}
	return out, err
}

// Register adds a webhook after checking its URL as the deliverer does
// (events.CheckWebhookURL; loopback literals too with AllowLoopback). It
// returns the webhook and its secret (the one given, or a generated one):
// the secret is never returned again.
func (p *Pipeline) Register(ctx context.Context, r Registration) (Webhook, string, error) {
	if p.isClosed() {
		return Webhook{}, "", ErrClosed
	}
	u, err := deliverer.CheckURL(r.URL, p.allow)
	if err != nil {
		return Webhook{}, "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	types, err := checkTypes(r.Types)
	if err != nil {
		return Webhook{}, "", err
	}
	secret := r.Secret
	if secret == "" {
		secret = events.NewWebhookSecret()
	} else if len(secret) < MinSecretLen || len(secret) > MaxSecretLen {
		return Webhook{}, "", fmt.Errorf("%w: a webhook secret is %d to %d bytes", ErrInvalid, MinSecretLen, MaxSecretLen)
	}
	hooks, err := p.st.ListWebhooks(ctx)
	if err != nil {
		return Webhook{}, "", err
	}
	if len(hooks) >= MaxWebhooks {
		return Webhook{}, "", fmt.Errorf("%w: at most %d webhooks", ErrInvalid, MaxWebhooks)
	}
	id := events.NewWebhookID()
	if err := p.secrets.put(id, secret); err != nil {
		return Webhook{}, "", err
	}
	w := store.Webhook{WebhookID: id, URL: u.String(), SecretRef: id, Types: types, CreatedAt: p.now().UTC()}
	if err := p.st.PutWebhook(ctx, w); err != nil {
		_ = p.secrets.del(id)
		return Webhook{}, "", err
	}
	return toWebhook(w), secret, nil
}

func checkTypes(ts []events.Type) ([]events.Type, error) {
	var out []events.Type
	for _, t := range ts {
		if !t.Valid() {
			return nil, fmt.Errorf("%w: unknown event type (created, paused, resumed, killed)", ErrInvalid)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func toWebhook(w store.Webhook) Webhook {
	return Webhook{ID: w.WebhookID, URL: w.URL, Types: slices.Clone(w.Types), CreatedAt: w.CreatedAt}
}

// Webhooks lists the registered webhooks (never their secrets), by id.
func (p *Pipeline) Webhooks(ctx context.Context) ([]Webhook, error) {
	hooks, err := p.st.ListWebhooks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Webhook, 0, len(hooks))
	for _, w := range hooks {
		out = append(out, toWebhook(w))
	}
	return out, nil
}

// DeleteWebhook removes a webhook and its secret (ErrNotFound if absent).
func (p *Pipeline) DeleteWebhook(ctx context.Context, id string) error {
	if err := p.st.DeleteWebhook(ctx, id); errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: no such webhook", ErrNotFound)
	} else if err != nil {
		return err
	}
	return p.secrets.del(id)
}

// Events returns admitted events.
func (p *Pipeline) Events(ctx context.Context, q Query) ([]events.Event, error) {
	limit := q.Limit
	if limit == 0 {
		limit = MaxLimit
	}
	if limit < 1 || limit > MaxLimit {
		return nil, fmt.Errorf("%w: limit is 1 to %d", ErrInvalid, MaxLimit)
	}
	order := q.Order
	if order == "" {
		order = Descending
	}
	if order != Ascending && order != Descending {
		return nil, fmt.Errorf("%w: order is asc or desc", ErrInvalid)
	}
	ids := []string{q.SandboxID}
	if q.SandboxID == "" {
		ids = p.st.index.ids()
	} else if !validSandboxID(q.SandboxID) {
		return nil, fmt.Errorf("%w: sandbox id", ErrInvalid)
	}
	var all []events.Event
	for _, id := range ids {
		evs, err := p.st.ListEvents(ctx, id, 0)
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.SandboxID == b.SandboxID {
			return a.Generation < b.Generation
		}
		if a.OccurredAtMs != b.OccurredAtMs {
			return a.OccurredAtMs < b.OccurredAtMs
		}
		return a.SandboxID < b.SandboxID
	})
	if order == Descending {
		slices.Reverse(all)
	}
	if len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// Deliveries returns the deliveries of one event, one per webhook that
// has one (by webhook id).
func (p *Pipeline) Deliveries(ctx context.Context, eventID string) ([]Delivery, error) {
	hooks, err := p.st.ListWebhooks(ctx)
	if err != nil {
		return nil, err
	}
	var out []Delivery
	for _, w := range hooks {
		d, err := p.st.GetDelivery(ctx, eventID, w.WebhookID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return nil, err
		}
		out = append(out, Delivery{EventID: d.EventID, WebhookID: d.WebhookID, Outcome: string(d.Outcome), Attempts: d.Attempts, Status: d.Status, Reason: d.Reason, UpdatedAt: d.UpdatedAt})
	}
	return out, nil
}

// Close stops the delivery loop (a delivery in flight is cut short and
// recorded as failed) and waits for it. Events still queued are
// delivered by the next pipeline opened on the same directory. Later
// calls return nil.
func (p *Pipeline) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	<-p.done
	return nil
}

func (p *Pipeline) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// enqueue is called for every event written to the store.
func (p *Pipeline) enqueue(ev events.Event) {
	p.mu.Lock()
	p.pending = append(p.pending, ev)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// loop delivers queued events in admission order, and sweeps.
func (p *Pipeline) loop() {
	defer close(p.done)
	tick := time.NewTicker(SweepEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-tick.C:
			p.sweep()
			continue
		case <-p.wake:
		}
		for {
			p.mu.Lock()
			evs := p.pending
			p.pending = nil
			p.mu.Unlock()
			if len(evs) == 0 {
				break
			}
			sum, err := p.dl.Deliver(p.ctx, evs)
			attrs := []any{slog.Int("events", sum.Events), slog.Int("delivered", sum.Delivered), slog.Int("failed", sum.Failed), slog.Int("skipped", sum.Skipped)}
			if err != nil && p.ctx.Err() == nil {
				p.log.Warn("events: delivery hit a store error", attrs...)
			} else if sum.Delivered+sum.Failed > 0 {
				p.log.Debug("events: delivered", attrs...)
			}
			if p.ctx.Err() != nil {
				return
			}
		}
	}
}

// stackKey is a forwarder.KeySource.
type stackKey []byte

func (k stackKey) StackKey(context.Context) ([]byte, error) { return k, nil }

// recStore is the file-backed store that also queues every new event
// for delivery (the DynamoDB stream's part) and indexes sandbox ids.
type recStore struct {
	*store.Memory
	index   *index
	onEvent func(events.Event)
}

func (s *recStore) PutEvent(ctx context.Context, ev events.Event) error {
	if err := s.index.add(ev.SandboxID); err != nil {
		return err
	}
	if err := s.Memory.PutEvent(ctx, ev); err != nil {
		return err
	}
	s.onEvent(ev)
	return nil
}

// index is the list of sandboxes with events, in a file.
type index struct {
	mu   sync.Mutex
	path string
	set  map[string]bool
}

func openIndex(path string) (*index, error) {
	x := &index{path: path, set: map[string]bool{}}
	var ids []string
	if err := readJSON(path, &ids); err != nil {
		return nil, err
	}
	for _, id := range ids {
		x.set[id] = true
	}
	return x, nil
}

func (x *index) add(id string) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.set[id] {
		return nil
	}
	x.set[id] = true
	if err := writeJSON(x.path, x.sortedLocked()); err != nil {
		delete(x.set, id)
		return err
	}
	return nil
}

// keep drops the ids f refuses.
func (x *index) keep(f func(id string) bool) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	var gone []string
	for id := range x.set {
		if !f(id) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	for _, id := range gone {
		delete(x.set, id)
	}
	if err := writeJSON(x.path, x.sortedLocked()); err != nil {
		for _, id := range gone {
			x.set[id] = true
		}
		return err
	}
	return nil
}

func (x *index) ids() []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sortedLocked()
}

func (x *index) sortedLocked() []string {
	out := make([]string, 0, len(x.set))
	for id := range x.set {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// secretFile keeps the webhook secrets (0600), the deliverer's
// SecretSource.
type secretFile struct {
	mu   sync.Mutex
	path string
	m    map[string]string
}

func openSecrets(path string) (*secretFile, error) {
	s := &secretFile{path: path, m: map[string]string{}}
	if err := readJSON(path, &s.m); err != nil {
		return nil, err
	}
	if s.m == nil {
		s.m = map[string]string{}
	}
	return s, nil
}

// Secret implements deliverer.SecretSource.
func (s *secretFile) Secret(_ context.Context, ref string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[ref]
	if !ok {
		return "", ErrNotFound
	}
	return v, nil
}

func (s *secretFile) put(id, secret string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = secret
	if err := writeJSON(s.path, s.m); err != nil {
		delete(s.m, id)
		return err
	}
	return nil
}

func (s *secretFile) del(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.m[id]
	if !ok {
		return nil
	}
	delete(s.m, id)
	if err := writeJSON(s.path, s.m); err != nil {
		s.m[id] = old
		return err
	}
	return nil
}

// maxFile bounds the small files read back.
const maxFile = 16 << 20

func readJSON(path string, v any) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("events/local: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return fmt.Errorf("events/local: %w", err)
	}
	if len(data) > maxFile || json.Unmarshal(data, v) != nil {
		return fmt.Errorf("%w: %s is not a file of the pipeline", ErrInvalid, filepath.Base(path))
	}
	return nil
}

// writeJSON writes v to path atomically, 0600.
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+strings.TrimSuffix(filepath.Base(path), ".json")+"-*")
	if err != nil {
		return fmt.Errorf("events/local: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("events/local: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("events/local: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("events/local: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("events/local: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("events/local: %w", err)
	}
	return nil
}
