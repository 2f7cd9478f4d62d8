// Package events is the shared encoding of Rayito's signed lifecycle events
// and of the webhooks that deliver them.
//
// # Event lines
//
// rayd prints one line per lifecycle event (created, paused, resumed,
// killed) on its stdout, the stream the platform logs (CloudWatch Logs on
// AWS, the sandbox's rayd log file locally):
//
//	rayito.event.v1 <base64url(json)> <base64url(mac)>
//
// The three fields are separated by single spaces; both encodings are
// unpadded base64url (RFC 4648 §5). json is the canonical encoding of an
// Event (json.Marshal of the struct: fields in declaration order,
// snake_case) and mac is HMAC-SHA256 keyed with the sandbox's key over
// exactly those JSON bytes. A line is at most MaxLineLen bytes.
//
// # Keys
//
// A stack holds one secret stack key. The key of one sandbox is
//
//	SandboxKey(stackKey, id) = HMAC-SHA256(stackKey, "rayito.events.v1|" + id)
//
// The SDK derives it and pushes it to rayd (ConfigureService's
// lifecycle_events section); rayd never sees the stack key, so a sandbox can
// sign events for itself only. The verifier (the events forwarder) derives
// the key from the sandbox the log stream names and checks the MAC, in
// constant time, before it parses anything. Encode and Decode take the
// per-sandbox key (KeySize bytes).
//
// Decode is strict: exactly three fields, the prefix, canonical unpadded
// base64url, a 32-byte MAC, the MAC verified before the JSON is read, then
// a JSON object with only known fields, no duplicate keys, the right types,
// every required field present and the field rules of Event.Validate. Its
// errors are ErrMalformed, ErrMAC and ErrInvalidEvent (use errors.Is); no
// error message holds any part of the line.
//
// Only the MAC authenticates a line. It proves the line came from code that
// holds the sandbox's key (rayd, or the SDK that pushed it), not that the
// event is recent or in order: the forwarder also refuses old events,
// events of another sandbox and events that do not advance the lifecycle.
//
// # Webhooks
//
// The events deliverer POSTs a JSON body to each registered webhook with
// two signatures, both keyed with the webhook's secret:
//
//	e2b-signature:    unpadded std base64 of SHA-256(secret || body)
//	rayito-signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<webhook id>." || body)>
//
// e2b-signature is E2B's own scheme, byte for byte (E2B's webhook docs:
// "each request includes a signature in the e2b-signature header", computed
// as the SHA-256 of the signature secret followed by the raw body, base64
// with the trailing "=" removed, e2b-signature-version "v1"), so receivers
// written for E2B work unchanged. That scheme signs no time and no webhook
// id: a captured delivery verifies forever, and the e2b-webhook-id and
// e2b-delivery-id headers beside it are not signed, so they cannot bound a
// replay by themselves. A receiver that checks only e2b-signature must
// bound replay with the signed body: refuse a body whose occurred_at_ms is
// older than it tolerates (the forwarder itself admits no event older than
// 24 h, and a delivery can be retried later than its event) and remember
// every event_id it accepted for at least that long (a replayed body
// repeats its event_id).
//
// rayito-signature is the scheme to verify: it binds the delivery time and
// the webhook id, and VerifyWebhook accepts it only within ±MaxSkew of the
// receiver's clock, comparing in constant time. It may carry several v1=
// entries (one per secret while a secret is rotated); one match suffices.
// VerifyWebhook never accepts e2b-signature alone (VerifyE2BSignature checks
// it for receivers that cannot do otherwise). A replay inside the window
// still verifies: receivers deduplicate by event_id.
//
// # Webhook targets
//
// CheckWebhookURL is the registration check of a webhook URL (https only, no
// user info, no fragment, no loopback, private, link-local or otherwise
// internal literal address in any of the numeric spellings a resolver
// accepts, no local-only names) and BlockedAddr the check the deliverer
// applies to every address it resolves before it dials it.
package events
