package rayito

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestEventsCallsOffline: what is refused before any call: a short secret,
// a URL that is not https or names a blocked address (on AWS; the local
// platform decides about loopback itself), a bad limit or order, a bad
// webhook id; on AWS the webhook and event calls are ErrUnimplemented.
func TestEventsCallsOffline(t *testing.T) {
	ctx := context.Background()
	local := []Option{WithBackend(BackendLocal), WithEndpoint("http://127.0.0.1:1")}
	aws := []Option{WithBackend(BackendAWS)}
	for name, err := range map[string]error{
		"short secret": func() error {
			_, _, err := RegisterWebhook(ctx, WebhookRegistration{URL: "https://hooks.example.com/x", Secret: "short"}, local...)
			return err
		}(),
		"http": func() error {
			_, _, err := RegisterWebhook(ctx, WebhookRegistration{URL: "http://hooks.example.com/x"}, local...)
			return err
		}(),
		"blocked on aws": func() error {
			_, _, err := RegisterWebhook(ctx, WebhookRegistration{URL: "https://10.0.0.1/x"}, aws...)
			return err
		}(),
		"limit": func() error { _, err := GetEvents(ctx, EventsQuery{Limit: 101}, local...); return err }(),
		"order": func() error { _, err := GetEvents(ctx, EventsQuery{Order: "up"}, local...); return err }(),
		"id":    DeleteWebhook(ctx, "../x", local...),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	for name, err := range map[string]error{
		"register": func() error {
			_, _, err := RegisterWebhook(ctx, WebhookRegistration{URL: "https://hooks.example.com/x"}, aws...)
			return err
		}(),
		"list":   func() error { _, err := ListWebhooks(ctx, aws...); return err }(),
		"delete": DeleteWebhook(ctx, "wh_1", aws...),
		"events": func() error { _, err := GetEvents(ctx, EventsQuery{}, aws...); return err }(),
	} {
		if !errors.Is(err, ErrUnimplemented) || !strings.Contains(err.Error(), "AWS") {
			t.Errorf("%s on AWS: %v, want ErrUnimplemented", name, err)
		}
	}
	// No platform: a clear error naming what to do.
	if _, err := ListWebhooks(ctx, local...); ReasonOf(err) != ReasonPlatformUnavailable {
		t.Errorf("no platform: %v", err)
	}
}
