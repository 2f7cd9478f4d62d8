package rayito

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/sdk/internal/smjson"
	"github.com/rayito-dev/rayito/sdk/internal/tokenstore"
)

// Lifecycle events and webhooks (docs/events.md). With WithEvents a
// sandbox's daemon prints a signed line for each lifecycle event
// (created, paused, resumed, killed); the platform's events pipeline
// verifies and stores them and POSTs them to the registered webhooks,
// signed with e2b-signature and rayito-signature (check them with the
// sdk/webhook package).
//
// On the local platform the pipeline runs inside the platform: Create
// asks it for the sandbox's key, and RegisterWebhook, ListWebhooks,
// DeleteWebhook and GetEvents talk to it. On AWS it is the events stack
// (rayito stack deploy events): Create reads the stack key
// (LifecycleEvents.StackKeySecretARN) with the caller's credentials and
// hands the sandbox only its own derived key; the webhook and event calls
// use the stack's table (WithEventsTable) and Secrets Manager.

// LifecycleEvents configures WithEvents.
type LifecycleEvents struct {
	// StackKeySecretARN is the events stack's key secret (AWS only; the
	// local platform holds a key of its own). The SDK reads it with the
	// caller's credentials (secretsmanager:GetSecretValue, the stack's
	// EventsLauncherPolicy) and pushes only the sandbox's derived key.
	StackKeySecretARN string
}

// WithEvents turns on signed lifecycle events for a new sandbox: once it
// is ready, Create gives its daemon the sandbox's key (ConfigureService's
// lifecycle_events), and the daemon prints a created event. A sandbox whose
// events cannot be turned on is killed and Create fails. The key never
// appears in a log or an error.
func WithEvents(le LifecycleEvents) Option {
	return sandboxOption(func(c *config) { c.events = &le })
}

// EventType is a lifecycle event's type.
type EventType string

// The event types.
const (
	EventCreated EventType = "created"
	EventPaused  EventType = "paused"
	EventResumed EventType = "resumed"
	EventKilled  EventType = "killed"
)

// LifecycleEvent is one stored event.
type LifecycleEvent struct {
	EventID   string    `json:"event_id"`
	SandboxID string    `json:"sandbox_id"`
	Type      EventType `json:"type"`
	// KillReason on killed: request, timeout or unknown.
	KillReason string    `json:"kill_reason,omitempty"`
	Generation uint64    `json:"generation"`
	OccurredAt time.Time `json:"occurred_at"`
	ImageARN   string    `json:"image_arn,omitempty"`
}

// EventsQuery selects GetEvents' events.
type EventsQuery struct {
	// SandboxID: that sandbox's events; empty: every sandbox's.
	SandboxID string
	// Limit is 1 to 100; 0 means 100.
	Limit int
	// Order is "asc" (oldest first) or "desc" (newest first, the
	// default).
	Order string
}

// Webhook is a registered webhook (never with its secret).
type Webhook struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// Types empty: every type.
	Types     []EventType `json:"types,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
}

// WebhookRegistration is what RegisterWebhook takes.
type WebhookRegistration struct {
	// URL is https only; it must not resolve to a private, loopback,
	// link-local or otherwise reserved address (a local platform started
	// with --events-allow-loopback accepts a literal loopback address).
	URL string
	// Secret signs the deliveries: at least 32 bytes. Empty: the platform
	// generates 32 random bytes and RegisterWebhook returns them.
	Secret string
	// Types restricts the webhook to these types; empty: all.
	Types []EventType
}

// RegisterWebhook registers a webhook and returns it with its signing
// secret (the one given, or the generated one): keep it, it is never
// returned again. A webhook receives the events of every sandbox of the
// platform: do not let your own customers register them. On AWS the
// secret is kept in Secrets Manager (rayito/webhooks/<webhook id>) and
// the webhook in the events table (WithEventsTable).
func RegisterWebhook(ctx context.Context, reg WebhookRegistration, opts ...Option) (Webhook, string, error) {
	cfg := newConfig(opts)
	if reg.Secret != "" && (len(reg.Secret) < events.MinWebhookSecretLen || len(reg.Secret) > events.MaxWebhookSecretLen) {
		return Webhook{}, "", newError(ReasonInvalidArgument, fmt.Sprintf("a webhook secret is %d to %d bytes", events.MinWebhookSecretLen, events.MaxWebhookSecretLen))
	}
	u, err := events.CheckWebhookURL(reg.URL)
	if err != nil && !(errors.Is(err, events.ErrBlockedURL) && cfg.backend == BackendLocal) {
		// The local platform decides about loopback itself.
		return Webhook{}, "", newError(ReasonInvalidArgument, "webhook URL: "+strings.TrimPrefix(err.Error(), "events: "), err)
	}
	var types []EventType
	for _, t := range reg.Types {
		if !events.Type(t).Valid() {
			return Webhook{}, "", newError(ReasonInvalidArgument, "unknown event type (created, paused, resumed, killed)")
		}
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	switch cfg.backend {
	case BackendLocal:
		in := localplatform.WebhookRegistration{URL: reg.URL, Secret: reg.Secret}
		for _, t := range types {
			in.Types = append(in.Types, string(t))
		}
		var out localplatform.WebhookCreated
		if err := localEvents(ctx, cfg, http.MethodPost, localplatform.EventsWebhooksPath, in, &out); err != nil {
			return Webhook{}, "", err
		}
		return webhookOf(out.Webhook), out.Secret, nil
	case BackendAWS:
		e, err := newEventsAWS(ctx, cfg)
		if err != nil {
			return Webhook{}, "", err
		}
		secret := reg.Secret
		if secret == "" {
			secret = events.NewWebhookSecret()
		}
		w, err := e.register(ctx, u.String(), types, secret)
		if err != nil {
			return Webhook{}, "", err
		}
		return w, secret, nil
	}
	return Webhook{}, "", errBackend(cfg)
}

// ListWebhooks lists the registered webhooks, oldest first.
func ListWebhooks(ctx context.Context, opts ...Option) ([]Webhook, error) {
	cfg := newConfig(opts)
	switch cfg.backend {
	case BackendLocal:
		var out localplatform.WebhookList
		if err := localEvents(ctx, cfg, http.MethodGet, localplatform.EventsWebhooksPath, nil, &out); err != nil {
			return nil, err
		}
		hooks := make([]Webhook, 0, len(out.Webhooks))
		for _, w := range out.Webhooks {
			hooks = append(hooks, webhookOf(w))
		}
		return hooks, nil
	case BackendAWS:
		e, err := newEventsAWS(ctx, cfg)
		if err != nil {
			return nil, err
		}
		hooks, err := e.list(ctx)
		if hooks == nil && err == nil {
			hooks = []Webhook{}
		}
		return hooks, err
	}
	return nil, errBackend(cfg)
}

// DeleteWebhook removes a webhook (ErrNotFound if there is none) and, on
// AWS, its secret.
func DeleteWebhook(ctx context.Context, id string, opts ...Option) error {
	cfg := newConfig(opts)
	if !events.ValidWebhookID(id) {
		return newError(ReasonInvalidArgument, "invalid webhook id (wh_ and 24 hex digits)")
	}
	switch cfg.backend {
	case BackendLocal:
		return localEvents(ctx, cfg, http.MethodDelete, localplatform.EventsWebhooksPath+"/"+id, nil, nil)
	case BackendAWS:
		e, err := newEventsAWS(ctx, cfg)
		if err != nil {
			return err
		}
		return e.remove(ctx, id)
	}
	return errBackend(cfg)
}

// GetEvents returns stored lifecycle events. On AWS it needs the
// sandbox's id (EventsQuery.SandboxID): the table is read by sandbox.
func GetEvents(ctx context.Context, q EventsQuery, opts ...Option) ([]LifecycleEvent, error) {
	cfg := newConfig(opts)
	if q.Limit < 0 || q.Limit > 100 {
		return nil, newError(ReasonInvalidArgument, "the limit is 1 to 100")
	}
	if q.Order != "" && q.Order != "asc" && q.Order != "desc" {
		return nil, newError(ReasonInvalidArgument, "the order is asc or desc")
	}
	switch cfg.backend {
	case BackendLocal:
	case BackendAWS:
		if q.SandboxID == "" {
			return nil, newError(ReasonInvalidArgument, "GetEvents on AWS needs a sandbox id (EventsQuery.SandboxID)")
		}
		if !tokenstore.ValidID(q.SandboxID) {
			return nil, newError(ReasonInvalidArgument, "invalid sandbox id")
		}
		e, err := newEventsAWS(ctx, cfg)
		if err != nil {
			return nil, err
		}
		evs, err := e.getEvents(ctx, q)
		if evs == nil && err == nil {
			evs = []LifecycleEvent{}
		}
		return evs, err
	default:
		return nil, errBackend(cfg)
	}
	v := url.Values{}
	if q.SandboxID != "" {
		v.Set("sandbox", q.SandboxID)
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Order != "" {
		v.Set("order", q.Order)
	}
	path := localplatform.EventsPath
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	var out localplatform.EventList
	if err := localEvents(ctx, cfg, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	evs := make([]LifecycleEvent, 0, len(out.Events))
	for _, e := range out.Events {
		evs = append(evs, LifecycleEvent{
			EventID: e.EventID, SandboxID: e.SandboxID, Type: EventType(e.Type), KillReason: string(e.KillReason),
			Generation: e.Generation, OccurredAt: time.UnixMilli(e.OccurredAtMs).UTC(), ImageARN: e.ImageARN,
		})
	}
	return evs, nil
}

func webhookOf(w localplatform.Webhook) Webhook {
	out := Webhook{ID: w.ID, URL: w.URL, CreatedAt: w.CreatedAt}
	for _, t := range w.Types {
		out.Types = append(out.Types, EventType(t))
	}
	return out
}

// errBackend refuses an unknown backend (ParseBackend's error).
func errBackend(cfg *config) error {
	_, err := ParseBackend(string(cfg.backend))
	return err
}

// maxEventsAnswer bounds a local platform's answer (100 events, or 100
// webhooks, are well under it).
const maxEventsAnswer = 1 << 20

// localEvents calls one of the local platform's events routes (owner
// only); out, when not nil, receives the JSON answer. Errors never quote
// a URL, a key or a secret.
func localEvents(ctx context.Context, cfg *config, method, path string, in, out any) error {
	var body io.Reader
	header := http.Header{}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return newError(ReasonInvalidArgument, "events request", err)
		}
		body = bytes.NewReader(b)
		header.Set("Content-Type", "application/json")
	}
	return localCall(ctx, cfg, localRequest{method: method, path: path, body: body, header: header, what: "events", missing: "this local platform has no events pipeline (update it)"}, out, nil)
}

// localRequest is one call of the local platform's own routes
// (/_rayito/...).
type localRequest struct {
	method, path string
	body         io.Reader
	header       http.Header
	// what names the feature in errors; missing is the error of a
	// platform without the route.
	what, missing string
}

// localCall makes one call of the local platform's own routes (owner
// only). A 2xx answer goes to out (JSON) when not nil, or is copied to raw
// when not nil. Errors never quote a URL, a key or a secret; the
// platform's error bodies are localplatform.EventsError.
func localCall(ctx context.Context, cfg *config, lr localRequest, out any, raw io.Writer) error {
	req, err := http.NewRequestWithContext(ctx, lr.method, strings.TrimRight(cfg.endpoint, "/")+lr.path, lr.body)
	if err != nil {
		return newError(ReasonInvalidArgument, "invalid local platform endpoint")
	}
	for k, v := range lr.header {
		req.Header[k] = v
	}
	hc := cfg.httpClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return newError(ReasonPlatformUnavailable, "no local platform at "+cfg.endpoint+"; start one with `rayito local up`")
		}
		return newError(ReasonInternal, "the local platform's "+lr.what+": the request failed")
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 && raw != nil {
		if _, err := io.Copy(raw, resp.Body); err != nil {
			return newError(ReasonInternal, "the local platform's "+lr.what+": the answer was cut")
		}
		return nil
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxEventsAnswer))
	if resp.StatusCode/100 == 2 {
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return newError(ReasonInternal, "the local platform's "+lr.what+" answer is malformed")
		}
		return nil
	}
	var e localplatform.EventsError
	_ = json.Unmarshal(data, &e)
	msg := e.Message
	if msg == "" || len(msg) > 512 {
		msg = resp.Status
	}
	switch {
	case resp.StatusCode == http.StatusForbidden:
		return newError(ReasonNotPlatformOwner, "the local platform at "+cfg.endpoint+" belongs to another user", ErrPermissionDenied)
	case resp.StatusCode == http.StatusNotFound && e.Code == localplatform.EventsNotFound:
		return newError(ReasonNotFound, msg)
	case resp.StatusCode == http.StatusNotFound:
		return newError(ReasonUnimplemented, lr.missing)
	case resp.StatusCode == http.StatusBadRequest && e.Code == localplatform.TemplatesUnsupported:
		return newError(ReasonUnimplemented, msg)
	case resp.StatusCode == http.StatusBadRequest:
		return newError(ReasonInvalidArgument, msg)
	case resp.StatusCode == http.StatusConflict:
		return newError(ReasonConflict, msg)
	}
	return newError(ReasonInternal, "the local platform's "+lr.what+": "+msg)
}

// sandboxEventsKey is sandbox id's events key: from the local platform's
// owner-only route, or derived from the stack key read from Secrets
// Manager with the caller's credentials (AWS). Errors never carry a key.
func sandboxEventsKey(ctx context.Context, cfg *config, id string) ([]byte, error) {
	var key []byte
	switch cfg.backend {
	case BackendLocal:
		var out localplatform.EventsSandboxKey
		if err := localEvents(ctx, cfg, http.MethodGet, localplatform.EventsSandboxKeyPath+"?sandbox="+url.QueryEscape(id), nil, &out); err != nil {
			return nil, err
		}
		key = out.SandboxKey
	case BackendAWS:
		arn := ""
		if cfg.events != nil {
			arn = cfg.events.StackKeySecretARN
		}
		if arn == "" {
			return nil, newError(ReasonInvalidArgument, "WithEvents on AWS needs LifecycleEvents.StackKeySecretARN (the events stack's key secret)")
		}
		if cfg.awsConfig == nil {
			return nil, newError(ReasonUnauthenticated, "WithEvents on AWS needs the AWS configuration of the SDK")
		}
		stack, err := smjson.New(*cfg.awsConfig).GetSecretValue(ctx, arn)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, newError(ReasonPermissionDenied, "the events stack key could not be read (secretsmanager:GetSecretValue; EventsLauncherPolicy)", ErrPermissionDenied)
		}
		if len(stack) < 32 {
			return nil, newError(ReasonInvalidArgument, "the events stack key is shorter than 32 bytes")
		}
		key = events.SandboxKey(stack, id)
		clear(stack)
	default:
		return nil, errBackend(cfg)
	}
	if len(key) != 32 {
		return nil, newError(ReasonInternal, "the platform handed out a sandbox key of the wrong size")
	}
	return key, nil
}
