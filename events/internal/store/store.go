// Package store is what the forwarder, the deliverer and the reconciler
// keep: per sandbox a state item (its lifecycle so far, the paused/resumed
// token bucket, and an "open" attribute present only while it is not
// killed, which is all the sparse open-sandbox index holds), the admitted
// event items, the delivery claims of (event, webhook) pairs and the
// registry of webhooks, whose signing secrets are kept by reference
// (a Secrets Manager name under rayito/webhooks/), never in the table.
//
// Two implementations: [Dynamo] (one DynamoDB table, conditional writes,
// stream-friendly items, a TTL attribute) and [Memory] (in process, safe
// for concurrent use, optionally backed by a file), for the local
// platform. Both pass the same contract tests (storetest_test.go).
package store

import (
	"context"
	"errors"
	"time"

	"github.com/rayito-dev/rayito/proto/events"
)

// TTL is how long event items, delivery claims and killed sandboxes' state
// items are kept (the table's TTL attribute).
const TTL = 7 * 24 * time.Hour

// Errors. Every method returns one of these (wrapped) or a backend error.
var (
	// ErrDuplicate: an item with that key exists (an event id already
	// written; a delivery already claimed).
	ErrDuplicate = errors.New("store: duplicate")
	// ErrConflict: the sandbox state changed since it was read (optimistic
	// concurrency); read it again and decide again.
	ErrConflict = errors.New("store: conflict")
	// ErrNotFound: no such item.
	ErrNotFound = errors.New("store: not found")
	// ErrInvalid: an argument a store cannot keep (empty id, bad
	// webhook).
	ErrInvalid = errors.New("store: invalid argument")
)

// Sandbox is the per-sandbox state item. The zero value with a SandboxID
// and Version 0 is a sandbox never seen.
type Sandbox struct {
	SandboxID string
	// Version counts the writes of this item; a write is conditional on
	// the version read (ErrConflict otherwise). 0: not stored yet.
	Version int64
	// Created is set by the created event; Killed by the killed one.
	Created bool
	Killed  bool
	// The last admitted event.
	LastEventID      string
	LastType         events.Type
	LastGeneration   uint64
	LastOccurredAtMs int64
	ImageARN         string
	ExecutionID      string
	// The paused/resumed token bucket: tokens left at BucketAtMs.
	Tokens     float64
	BucketAtMs int64
}

// Open reports whether the sandbox belongs in the open-sandbox index:
// created and not killed.
func (s Sandbox) Open() bool { return s.Created && !s.Killed }

// Outcome is a delivery's state.
type Outcome string

// Outcomes.
const (
	Claimed   Outcome = "claimed"
	Delivered Outcome = "delivered"
	Failed    Outcome = "failed"
)

// Delivery is the claim of one (event, webhook) pair.
type Delivery struct {
	EventID   string
	WebhookID string
	Outcome   Outcome
	Attempts  int
	// Status is the last HTTP status (0: none, a transport error).
	Status int
	// Reason is a closed word for failures (e.g. "status", "transport",
	// "blocked_address", "bad_url"), never a message from the receiver.
	Reason    string
	UpdatedAt time.Time
}

// Webhook is one registered receiver. Types empty means every type.
type Webhook struct {
	WebhookID string
	URL       string
	// SecretRef names the signing secret (a Secrets Manager secret id
	// under rayito/webhooks/ on AWS); the secret itself is never stored
	// here.
	SecretRef string
	Types     []events.Type
	CreatedAt time.Time
}

// Wants reports whether the webhook receives events of type t.
func (w Webhook) Wants(t events.Type) bool {
	if len(w.Types) == 0 {
		return true
	}
	for _, x := range w.Types {
		if x == t {
			return true
		}
	}
	return false
}

// RegistrationSkew is how long before its registration an event may have
// occurred and still reach a new webhook: the clocks of a sandbox and of
// the platform differ, and a stream record is handled a little after it
// is written.
const RegistrationSkew = 5 * time.Minute

// Receives reports whether ev goes to the webhook: of a type it wants,
// and not from before the webhook was registered (less
// RegistrationSkew): a new webhook gets no history, also when a platform
// that restarted delivers what it had queued.
func (w Webhook) Receives(ev events.Event) bool {
	return w.Wants(ev.Type) && !w.CreatedAt.After(time.UnixMilli(ev.OccurredAtMs).Add(RegistrationSkew))
}

// Store is what the three Lambdas use.
type Store interface {
	// GetSandbox returns the sandbox's state; a sandbox never seen is
	// returned with Version 0 and no error.
	GetSandbox(ctx context.Context, sandboxID string) (Sandbox, error)
	// PutSandbox writes next if the stored version is still prev.Version
	// (ErrConflict otherwise) and returns it with the new version.
	PutSandbox(ctx context.Context, prev, next Sandbox) (Sandbox, error)
	// PutEvent writes an event item unless one with its event id exists
	// for that sandbox (ErrDuplicate).
	PutEvent(ctx context.Context, ev events.Event) error
	// HasEvent reports whether the sandbox has an event with that id.
	HasEvent(ctx context.Context, sandboxID, eventID string) (bool, error)
	// ListEvents returns up to limit events of a sandbox, oldest first.
	ListEvents(ctx context.Context, sandboxID string, limit int) ([]events.Event, error)
	// OpenSandboxes returns one page of the open-sandbox index (a query
	// of the sparse index, never a scan) and the token of the next page
	// ("" at the end).
	OpenSandboxes(ctx context.Context, pageToken string, limit int) ([]Sandbox, string, error)

	// Claim records that a delivery of (eventID, webhookID) has started;
	// ErrDuplicate if it was claimed before, unless that claim is still
	// Claimed and was made before staleBefore (its deliverer died): then
	// it is taken over.
	Claim(ctx context.Context, eventID, webhookID string, now, staleBefore time.Time) error
	// Finish records a claimed delivery's outcome.
	Finish(ctx context.Context, d Delivery) error
	// GetDelivery returns a delivery's claim (ErrNotFound if none).
	GetDelivery(ctx context.Context, eventID, webhookID string) (Delivery, error)

	// PutWebhook adds or replaces a webhook.
	PutWebhook(ctx context.Context, w Webhook) error
	// ListWebhooks returns every registered webhook.
	ListWebhooks(ctx context.Context) ([]Webhook, error)
	// DeleteWebhook removes one (ErrNotFound if absent).
	DeleteWebhook(ctx context.Context, webhookID string) error
}
