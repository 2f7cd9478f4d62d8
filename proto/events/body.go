package events

// WebhookTypePrefix prefixes the event type in a webhook body's type
// field: sandbox.lifecycle.created, .paused, .resumed, .killed.
const WebhookTypePrefix = "sandbox.lifecycle."

// WebhookBody is the JSON body of a webhook delivery, the one shape the
// stack's deliverer, the local platform's and receivers share.
type WebhookBody struct {
	EventID   string `json:"event_id"`
	SandboxID string `json:"sandbox_id"`
	// Type is WebhookTypePrefix and the event's Type.
	Type string `json:"type"`
	// KillReason, on killed only: request, timeout or unknown.
	KillReason   string `json:"kill_reason,omitempty"`
	Generation   uint64 `json:"generation"`
	OccurredAtMs int64  `json:"occurred_at_ms"`
	// TemplateID is the event's image ARN (empty on the local platform).
	TemplateID  string `json:"template_id"`
	ExecutionID string `json:"execution_id,omitempty"`
}

// NewWebhookBody is the body that delivers ev.
func NewWebhookBody(ev Event) WebhookBody {
	return WebhookBody{
		EventID: ev.EventID, SandboxID: ev.SandboxID, Type: WebhookTypePrefix + string(ev.Type),
		KillReason: string(ev.KillReason), Generation: ev.Generation, OccurredAtMs: ev.OccurredAtMs,
		TemplateID: ev.ImageARN, ExecutionID: ev.ExecutionID,
	}
}
