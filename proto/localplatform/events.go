package localplatform

import (
	"time"

	"github.com/rayito-dev/rayito/proto/events"
)

// Lifecycle events on the local platform (docs/events.md). The platform
// holds a stack key of its own, follows every sandbox's rayd stdout and
// admits its signed lines under the id of the sandbox it runs, and
// delivers them to the webhooks registered on it. These routes of the
// control endpoint serve its owner only, like every other route.
const (
	// EventsPath lists events: GET ?sandbox=ID&limit=1..100&order=asc|desc
	// (JSON EventList). Without sandbox: every sandbox's.
	EventsPath = "/_rayito/events"
	// EventsSandboxKeyPath answers a sandbox's key: GET ?sandbox=ID (JSON
	// EventsSandboxKey), only for a sandbox of this platform.
	EventsSandboxKeyPath = "/_rayito/events/sandbox-key"
	// EventsWebhooksPath lists (GET, JSON WebhookList) and registers
	// (POST WebhookRegistration, 201 WebhookCreated) webhooks;
	// EventsWebhooksPath + "/" + id deletes one (DELETE, 204).
	EventsWebhooksPath = "/_rayito/events/webhooks"
)

// Error codes of EventsError.
const (
	EventsInvalid     = "invalid_argument"
	EventsBlockedURL  = "blocked_url"
	EventsNotFound    = "not_found"
	EventsUnavailable = "unavailable"
)

// EventsError is the JSON body of an events route's 4xx/5xx answer: a
// closed code and a message that never quotes a URL, a key or a secret.
type EventsError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// EventList is EventsPath's answer.
type EventList struct {
	Events []events.Event `json:"events"`
}

// EventsSandboxKey is EventsSandboxKeyPath's answer: the 32-byte key
// (standard base64 in JSON) to push to that sandbox's rayd.
type EventsSandboxKey struct {
	SandboxKey []byte `json:"sandboxKey"`
}

// WebhookRegistration registers a webhook. Secret empty: the platform
// generates 32 random bytes; else at least 32 bytes.
type WebhookRegistration struct {
	URL    string   `json:"url"`
	Secret string   `json:"secret,omitempty"`
	Types  []string `json:"types,omitempty"`
}

// Webhook is a registered webhook, never with its secret.
type Webhook struct {
	ID        string    `json:"id"`
	URL       string    `json:"url"`
	Types     []string  `json:"types,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// WebhookCreated answers a registration: the webhook and its secret,
// given this once.
type WebhookCreated struct {
	Webhook Webhook `json:"webhook"`
	Secret  string  `json:"secret"`
}

// WebhookList is EventsWebhooksPath's GET answer.
type WebhookList struct {
	Webhooks []Webhook `json:"webhooks"`
}
