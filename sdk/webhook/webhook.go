// Package webhook checks the signatures of the lifecycle event webhooks
// Rayito delivers (docs/events.md), for receivers written in Go.
//
// Every delivery carries two signatures of the raw body:
//
//   - rayito-signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
//     "<t>.<webhook id>." + body)>. [Verify] checks it: it binds the
//     webhook id and a time, and is accepted only within MaxSkew (5
//     minutes) of the receiver's clock. Prefer it.
//   - e2b-signature: unpadded base64 of SHA-256(secret + body), E2B's own
//     scheme, so receivers written for E2B work unchanged. Its header
//     signs no time: a captured delivery verifies forever. [VerifyE2B]
//     checks it and then bounds replays with the one time it does sign,
//     the body's occurred_at_ms: an event more than MaxSkew from now is
//     ErrStale. That also refuses a delivery that came late (an event
//     delivered more than 5 minutes after it happened, e.g. after a
//     deliverer backlog): prefer Verify, whose time is the attempt's.
//
// Read the body raw (at most a few KiB: 64 KiB is plenty), verify, then
// parse it, and deduplicate by (sandbox_id, event_id): a delivery may be
// retried, and a replay within the window still verifies.
package webhook

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/rayito-dev/rayito/proto/events"
)

// MaxSkew is how far rayito-signature's time may be from now, either way.
const MaxSkew = events.MaxSkew

// Errors (use errors.Is).
var (
	// ErrSignature: no signature, a malformed one, or none that matches.
	ErrSignature = events.ErrSignature
	// ErrStale: correctly signed, but outside MaxSkew of now (a replay,
	// or a clock far off).
	ErrStale = events.ErrStale
)

// Header names of a delivery.
const (
	HeaderWebhookID        = events.HeaderWebhookID
	HeaderDeliveryID       = events.HeaderDeliveryID
	HeaderSignature        = events.HeaderRayitoSignature
	HeaderE2BSignature     = events.HeaderE2BSignature
	HeaderSignatureVersion = events.HeaderSignatureVersion
)

// Verify checks a delivery's rayito-signature: header is the request's
// headers, body its raw body, secret the webhook's secret, webhookID the
// id RegisterWebhook returned (not the one in the request's headers, which
// is not signed), now the receiver's clock. It compares in constant time,
// accepts any of several v1= entries (a secret being rotated), and never
// accepts e2b-signature alone.
func Verify(header http.Header, body []byte, secret, webhookID string, now time.Time) error {
	return events.VerifyWebhook(header, body, secret, webhookID, now)
}

// VerifyE2B checks e2b-signature (E2B's scheme: no webhook id, no time in
// the header), then that the signed body's occurred_at_ms is within
// MaxSkew of now (ErrStale otherwise; a body without it is ErrSignature).
// Receivers must still deduplicate by (sandbox_id, event_id): a replay
// within the window verifies.
func VerifyE2B(header http.Header, body []byte, secret string, now time.Time) error {
	if err := events.VerifyE2BSignature(header, body, secret); err != nil {
		return err
	}
	var ev struct {
		OccurredAtMs *int64 `json:"occurred_at_ms"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.OccurredAtMs == nil {
		return fmt.Errorf("%w: the signed body has no occurred_at_ms", ErrSignature)
	}
	if d := now.Sub(time.UnixMilli(*ev.OccurredAtMs)); d > MaxSkew || d < -MaxSkew {
		return ErrStale
	}
	return nil
}

// Event is a delivery's JSON body: event_id, sandbox_id, type
// (sandbox.lifecycle.created, .paused, .resumed or .killed), kill_reason
// (on killed: request, timeout or unknown), generation, occurred_at_ms,
// template_id, execution_id.
type Event = events.WebhookBody
