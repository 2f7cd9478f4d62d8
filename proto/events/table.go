package events

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// The events table: the one DynamoDB table of the events stack, as every
// program that reads or writes it spells it (the stack's Lambdas, the
// SDK's webhook and event calls on AWS). String keys pk and sk; every item
// has kind.
//
//	kind      pk              sk                 written by
//	sandbox   sandbox#<id>    state              the forwarder, the reconciler
//	event     sandbox#<id>    event#<event id>   the forwarder, the reconciler
//	delivery  delivery#<eid>  webhook#<id>       the deliverer
//	webhook   webhooks        webhook#<id>       RegisterWebhook (the SDK), the local platform
//
// A caller's policy grants partitions by their leading key (EventsReader:
// sandbox#*; EventsWebhookAdmin: webhooks), so the layout is part of the
// stack's least privilege.
const (
	TableAttrPK   = "pk"
	TableAttrSK   = "sk"
	TableAttrKind = "kind"

	TableKindEvent   = "event"
	TableKindWebhook = "webhook"

	// TableWebhooksPK is the webhook registry's partition.
	TableWebhooksPK = "webhooks"
	// TableEventSKPrefix starts the sort key of an event item.
	TableEventSKPrefix = "event#"
	// TableWebhookSKPrefix starts the sort key of a webhook item (and of a
	// delivery claim).
	TableWebhookSKPrefix = "webhook#"
)

// TableSandboxPK is the partition of a sandbox's state and event items.
func TableSandboxPK(sandboxID string) string { return "sandbox#" + sandboxID }

// TableEventSK is an event item's sort key.
func TableEventSK(eventID string) string { return TableEventSKPrefix + eventID }

// TableWebhookSK is a webhook item's sort key.
func TableWebhookSK(webhookID string) string { return TableWebhookSKPrefix + webhookID }

// Webhook registry rules, the same on AWS and on the local platform.
const (
	// WebhookSecretPrefix is the Secrets Manager name prefix of every
	// webhook signing secret (rayito/webhooks/<webhook id>); nothing else
	// is ever read as one, and sandboxes never get these.
	WebhookSecretPrefix = "rayito/webhooks/"
	// MinWebhookSecretLen and MaxWebhookSecretLen bound a signing
	// secret, in bytes.
	MinWebhookSecretLen = 32
	MaxWebhookSecretLen = 1024
	// MaxWebhooks bounds the registry.
	MaxWebhooks = 100
)

// NewWebhookID returns a fresh webhook id: "wh_" and 24 lowercase hex
// digits from crypto/rand.
func NewWebhookID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "wh_" + hex.EncodeToString(b[:])
}

// ValidWebhookID reports whether id has the shape NewWebhookID gives.
func ValidWebhookID(id string) bool {
	h, ok := strings.CutPrefix(id, "wh_")
	if !ok || len(h) != 24 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// NewWebhookSecret returns a fresh signing secret: 32 random bytes as 64
// lowercase hex digits.
func NewWebhookSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
