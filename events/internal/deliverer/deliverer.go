// Package deliverer posts admitted lifecycle events to the registered
// webhooks.
//
// For each new event item of a DynamoDB stream batch and each webhook that
// wants its type, the deliverer claims the (event, webhook) pair with a
// conditional write (a pair is attempted once, whoever retries the
// batch), then:
//
//   - checks the URL (events.CheckWebhookURL: https only, no blocked
//     address in any spelling) and resolves its host once; every resolved
//     address must pass events.BlockedAddr, and the connection is dialled
//     to the checked address, never resolved again;
//   - POSTs the JSON body with the E2B headers (e2b-webhook-id, a fresh
//     e2b-delivery-id per attempt, e2b-signature-version v1,
//     e2b-signature) and rayito-signature (the attempt's time);
//   - follows no redirect, gives each attempt 10 s, reads at most 64 KiB
//     of the response, makes at most 3 attempts and retries only 5xx
//     answers and transport errors; a 401/403 re-reads the webhook's
//     secret past its cache (at most 300 s old) once and tries again;
//   - records delivered or failed, and sends a failure to the SQS queue.
//
// Webhooks are delivered in parallel; one webhook's events are delivered
// in stream order, so a broken or slow receiver delays only itself.
// Nothing is logged but counts: never a URL, a secret, a body or a
// receiver's answer.
package deliverer

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/rayito-dev/rayito/events/internal/store"
	"github.com/rayito-dev/rayito/proto/events"
)

// Defaults.
const (
	DefaultAttemptTimeout = 10 * time.Second
	DefaultMaxAttempts    = 3
	DefaultSecretTTL      = 300 * time.Second
	MaxResponseBytes      = 64 << 10
	// Parallel bounds the webhooks delivered at once.
	Parallel = 8
	// ClaimTimeout: a claim still open this long after it was made
	// belongs to a deliverer that died (one delivery takes at most about
	// 45 s: a resolution and 3 attempts of 10 s), and may be taken over.
	ClaimTimeout = 2 * time.Minute
)

// ErrOutOfTime is returned when the invocation's deadline is too close to
// start another delivery: the pairs not yet claimed are left for the
// batch's retry (those finished are skipped then).
var ErrOutOfTime = errors.New("deliverer: too close to the deadline to start another delivery")

// Failure reasons (Delivery.Reason and the SQS message's reason).
const (
	ReasonBadURL         = "bad_url"
	ReasonBlockedAddress = "blocked_address"
	ReasonResolve        = "resolve_failed"
	ReasonStatus         = "status"
	ReasonRedirect       = "redirect"
	ReasonTransport      = "transport"
	ReasonSecret         = "secret_unavailable"
)

// TypePrefix prefixes the event type in the body's type field.
const TypePrefix = events.WebhookTypePrefix

// Resolver resolves a host name (net.Resolver fits).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// SecretSource reads a webhook's signing secret by reference.
type SecretSource interface {
	Secret(ctx context.Context, ref string) (string, error)
}

// FailureQueue receives the failed deliveries.
type FailureQueue interface {
	SendFailure(ctx context.Context, f Failure) error
}

// Failure is the SQS message of a failed delivery: ids, counts and a
// closed reason, never the URL, the body or the receiver's answer.
type Failure struct {
	EventID   string `json:"event_id"`
	SandboxID string `json:"sandbox_id"`
	WebhookID string `json:"webhook_id"`
	Type      string `json:"type"`
	Reason    string `json:"reason"`
	Status    int    `json:"status,omitempty"`
	Attempts  int    `json:"attempts"`
}

// Body is the JSON a webhook receives (proto/events' one shape).
type Body = events.WebhookBody

// NewBody is the body of ev; the image ARN is the template id.
func NewBody(ev events.Event) Body { return events.NewWebhookBody(ev) }

// Deliverer delivers; the zero values of the optional fields are the
// production defaults.
type Deliverer struct {
	Store   store.Store
	Secrets SecretSource
	Queue   FailureQueue

	// Resolver resolves webhook hosts (net.DefaultResolver when nil).
	Resolver Resolver
	// Dial connects to a checked address (a net.Dialer when nil). Tests
	// map the checked addresses to loopback receivers here.
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// RootCAs are the TLS roots (the system's when nil).
	RootCAs *x509.CertPool
	// AllowAddr, when set, lets through an address events.BlockedAddr
	// blocks, in the URL and in resolution (the local platform's
	// loopback receivers; see CheckURL). Nil: nothing blocked is allowed.
	AllowAddr func(netip.Addr) bool
	// AttemptTimeout bounds one attempt (DefaultAttemptTimeout when 0).
	AttemptTimeout time.Duration
	// MaxAttempts (DefaultMaxAttempts when 0).
	MaxAttempts int
	// SecretTTL is how long a read secret is used (DefaultSecretTTL when
	// 0; never more than DefaultSecretTTL).
	SecretTTL time.Duration
	// Backoff is the pause before attempt n (n >= 2); 200ms*(n-1) when nil.
	Backoff func(n int) time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log receives the one summary line per invocation (slog.Default
	// when nil).
	Log *slog.Logger

	cacheMu sync.Mutex
	cache   map[string]cachedSecret
}

type cachedSecret struct {
	value string
	at    time.Time
}

// Summary counts what one invocation did.
type Summary struct {
	Events    int
	Delivered int
	Failed    int
	Skipped   int // claimed before (a retried batch)
}

func (d *Deliverer) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Deliverer) attemptTimeout() time.Duration {
	if d.AttemptTimeout > 0 {
		return d.AttemptTimeout
	}
	return DefaultAttemptTimeout
}

func (d *Deliverer) maxAttempts() int {
	if d.MaxAttempts > 0 {
		return d.MaxAttempts
	}
	return DefaultMaxAttempts
}

func (d *Deliverer) secretTTL() time.Duration {
	if d.SecretTTL > 0 && d.SecretTTL <= DefaultSecretTTL {
		return d.SecretTTL
	}
	return DefaultSecretTTL
}

// Handle is the Lambda handler for the table's stream: it delivers the
// new event items (INSERT records of kind event) and ignores the rest. It
// fails (and the batch is retried; claims make that safe) only when the
// store fails.
func (d *Deliverer) Handle(ctx context.Context, ev lambdaevents.DynamoDBEvent) (Summary, error) {
	var evs []events.Event
	for _, r := range ev.Records {
		if r.EventName != "INSERT" {
			continue
		}
		if e, ok := store.EventFromStream(r.Change.NewImage); ok {
			evs = append(evs, e)
		}
	}
	sum, err := d.Deliver(ctx, evs)
	l := d.Log
	if l == nil {
		l = slog.Default()
	}
	l.InfoContext(ctx, "deliverer summary", slog.Int("records", len(ev.Records)), slog.Int("events", sum.Events),
		slog.Int("delivered", sum.Delivered), slog.Int("failed", sum.Failed), slog.Int("skipped", sum.Skipped))
	return sum, err
}

// Deliver delivers evs, in order, to every webhook that wants them.
func (d *Deliverer) Deliver(ctx context.Context, evs []events.Event) (Summary, error) {
	sum := Summary{Events: len(evs)}
	if len(evs) == 0 {
		return sum, nil
	}
	hooks, err := d.Store.ListWebhooks(ctx)
	if err != nil {
		return sum, err
	}
	var (
		mu      sync.Mutex
		errs    []error
		wg      sync.WaitGroup
		permits = make(chan struct{}, Parallel)
	)
	for _, w := range hooks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			permits <- struct{}{}
			defer func() { <-permits }()
			for _, ev := range evs {
				if !w.Receives(ev) {
					continue
				}
				outcome, err := d.deliverOne(ctx, ev, w)
				if errors.Is(err, ErrOutOfTime) {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case outcome == store.Delivered:
					sum.Delivered++
				case outcome == store.Failed:
					sum.Failed++
				default:
					sum.Skipped++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return sum, errors.Join(errs...)
}

// deliverOne claims, delivers and records one pair. The outcome is ""
// when someone claimed it before.
func (d *Deliverer) deliverOne(ctx context.Context, ev events.Event, w store.Webhook) (store.Outcome, error) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d.budget() {
		return "", ErrOutOfTime
	}
	now := d.now()
	if err := d.Store.Claim(ctx, ev.EventID, w.WebhookID, now, now.Add(-ClaimTimeout)); errors.Is(err, store.ErrDuplicate) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	res := d.attempt(ctx, ev, w)
	res.UpdatedAt = d.now()
	if err := d.Store.Finish(ctx, res); err != nil {
		return "", err
	}
	if res.Outcome == store.Failed && d.Queue != nil {
		f := Failure{EventID: ev.EventID, SandboxID: ev.SandboxID, WebhookID: w.WebhookID, Type: TypePrefix + string(ev.Type), Reason: res.Reason, Status: res.Status, Attempts: res.Attempts}
		if err := d.Queue.SendFailure(ctx, f); err != nil {
			return "", err
		}
	}
	return res.Outcome, nil
}

// attempt runs the attempts of one delivery and returns its outcome.
func (d *Deliverer) attempt(ctx context.Context, ev events.Event, w store.Webhook) store.Delivery {
	res := store.Delivery{EventID: ev.EventID, WebhookID: w.WebhookID, Outcome: store.Failed}
	u, err := CheckURL(w.URL, d.AllowAddr)
	if err != nil {
		res.Reason = ReasonBadURL
		if errors.Is(err, events.ErrBlockedURL) {
			res.Reason = ReasonBlockedAddress
		}
		return res
	}
	host := u.Hostname()
	addr, reason := d.resolve(ctx, host)
	if reason != "" {
		res.Reason = reason
		return res
	}
	port := uint16(443)
	if p := u.Port(); p != "" {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 1 || n > 65535 {
			res.Reason = ReasonBadURL
			return res
		}
		port = uint16(n)
	}
	target := netip.AddrPortFrom(addr, port)
	body, err := json.Marshal(NewBody(ev))
	if err != nil {
		res.Reason = ReasonBadURL
		return res
	}
	client := d.client(host, target)
	defer client.CloseIdleConnections()

	secret, err := d.secret(ctx, w.SecretRef, false)
	if err != nil {
		res.Reason = ReasonSecret
		return res
	}
	reread := false
	for n := 1; n <= d.maxAttempts(); n++ {
		if n > 1 {
			if err := sleep(ctx, d.backoff(n)); err != nil {
				res.Reason = ReasonTransport
				return res
			}
		}
		res.Attempts = n
		status, err := d.post(ctx, client, u.String(), w.WebhookID, secret, body)
		res.Status = status
		switch {
		case err != nil:
			res.Reason = ReasonTransport
			continue
		case status >= 200 && status < 300:
			res.Outcome, res.Reason = store.Delivered, ""
			return res
		case status >= 300 && status < 400:
			res.Reason = ReasonRedirect
			return res
		case (status == http.StatusUnauthorized || status == http.StatusForbidden) && !reread:
			reread = true
			res.Reason = ReasonStatus
			fresh, err := d.secret(ctx, w.SecretRef, true)
			if err != nil {
				res.Reason = ReasonSecret
				return res
			}
			secret = fresh
			continue
		case status >= 500:
			res.Reason = ReasonStatus
			continue
		default:
			res.Reason = ReasonStatus
			return res
		}
	}
	return res
}

// budget is the longest one delivery can take.
func (d *Deliverer) budget() time.Duration {
	b := d.attemptTimeout() // the resolution
	for n := 1; n <= d.maxAttempts(); n++ {
		b += d.attemptTimeout()
		if n > 1 {
			b += d.backoff(n)
		}
	}
	return b + time.Second
}

func (d *Deliverer) backoff(n int) time.Duration {
	if d.Backoff != nil {
		return d.Backoff(n)
	}
	return time.Duration(n-1) * 200 * time.Millisecond
}

func sleep(ctx context.Context, dur time.Duration) error {
	if dur <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// resolve returns the one address to dial, or a failure reason.
func (d *Deliverer) resolve(ctx context.Context, host string) (netip.Addr, string) {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		if d.blocked(a) {
			return netip.Addr{}, ReasonBlockedAddress
		}
		return a.Unmap(), ""
	}
	r := d.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	rctx, cancel := context.WithTimeout(ctx, d.attemptTimeout())
	defer cancel()
	addrs, err := r.LookupNetIP(rctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, ReasonResolve
	}
	for _, a := range addrs {
		if d.blocked(a) {
			return netip.Addr{}, ReasonBlockedAddress
		}
	}
	return addrs[0].Unmap(), ""
}

// client is an HTTP client that dials target whatever the URL says,
// verifies the certificate for host, and follows no redirect.
func (d *Deliverer) client(host string, target netip.AddrPort) *http.Client {
	dial := d.Dial
	if dial == nil {
		var nd net.Dialer
		dial = func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
			return nd.DialContext(ctx, "tcp", a.String())
		}
	}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dial(ctx, target)
		},
		TLSClientConfig:        &tls.Config{RootCAs: d.RootCAs, ServerName: host, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		MaxResponseHeaderBytes: 64 << 10,
		DisableKeepAlives:      true,
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// post makes one attempt and returns the status.
func (d *Deliverer) post(ctx context.Context, c *http.Client, url, webhookID, secret string, body []byte) (int, error) {
	actx, cancel := context.WithTimeout(ctx, d.attemptTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	var rid [16]byte
	if _, err := rand.Read(rid[:]); err != nil {
		return 0, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "rayito-events-deliverer/1")
	h.Set(events.HeaderWebhookID, webhookID)
	h.Set(events.HeaderDeliveryID, hex.EncodeToString(rid[:]))
	h.Set(events.HeaderSignatureVersion, events.SignatureVersion)
	h.Set(events.HeaderE2BSignature, events.E2BSignature(secret, body))
	h.Set(events.HeaderRayitoSignature, events.RayitoSignature(secret, webhookID, body, d.now()))
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, MaxResponseBytes)); err != nil {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, nil
}

// secret returns the webhook's secret from the cache, or reads it (always
// when force).
func (d *Deliverer) secret(ctx context.Context, ref string, force bool) (string, error) {
	now := d.now()
	d.cacheMu.Lock()
	c, ok := d.cache[ref]
	d.cacheMu.Unlock()
	if ok && !force && now.Sub(c.at) < d.secretTTL() {
		return c.value, nil
	}
	v, err := d.Secrets.Secret(ctx, ref)
	if err != nil {
		return "", err
	}
	d.cacheMu.Lock()
	if d.cache == nil {
		d.cache = map[string]cachedSecret{}
	}
	d.cache[ref] = cachedSecret{value: v, at: now}
	d.cacheMu.Unlock()
	return v, nil
}
