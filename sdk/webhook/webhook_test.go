package webhook_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/sdk/webhook"
)

// TestVerify: a fresh signature verifies; one older than 5 minutes is
// ErrStale; another secret, another webhook id, another body, or only
// e2b-signature are ErrSignature; VerifyE2B checks E2B's scheme.
func TestVerify(t *testing.T) {
	const secret, id = "0123456789abcdef0123456789abcdef", "wh_1"
	body := []byte(`{"event_id":"x"}`)
	now := time.Unix(1767225600, 0)
	h := http.Header{}
	h.Set(webhook.HeaderSignature, events.RayitoSignature(secret, id, body, now))
	h.Set(webhook.HeaderE2BSignature, events.E2BSignature(secret, body))
	if err := webhook.Verify(h, body, secret, id, now.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := webhook.Verify(h, body, secret, id, now.Add(5*time.Minute+time.Second)); !errors.Is(err, webhook.ErrStale) {
		t.Fatalf("replay after 5 min: %v", err)
	}
	e2bOnly := http.Header{}
	e2bOnly.Set(webhook.HeaderE2BSignature, h.Get(webhook.HeaderE2BSignature))
	for name, err := range map[string]error{
		"secret":   webhook.Verify(h, body, secret+"x", id, now),
		"id":       webhook.Verify(h, body, secret, "wh_2", now),
		"body":     webhook.Verify(h, []byte(`{}`), secret, id, now),
		"e2b only": webhook.Verify(e2bOnly, body, secret, id, now),
	} {
		if !errors.Is(err, webhook.ErrSignature) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestVerifyE2B: e2b-signature verifies, and the signed body's
// occurred_at_ms bounds a replay to 5 minutes either way; a body without
// it, another secret or another body are ErrSignature.
func TestVerifyE2B(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	at := time.Unix(1767225600, 0)
	body := []byte(`{"event_id":"x","occurred_at_ms":1767225600000}`)
	h := http.Header{}
	h.Set(webhook.HeaderE2BSignature, events.E2BSignature(secret, body))
	for _, d := range []time.Duration{0, 5 * time.Minute, -5 * time.Minute, time.Second} {
		if err := webhook.VerifyE2B(h, body, secret, at.Add(d)); err != nil {
			t.Fatalf("%v after the event: %v", d, err)
		}
	}
	for _, d := range []time.Duration{5*time.Minute + time.Millisecond, -5*time.Minute - time.Millisecond, 24 * time.Hour} {
		if err := webhook.VerifyE2B(h, body, secret, at.Add(d)); !errors.Is(err, webhook.ErrStale) {
			t.Fatalf("replay %v after the event: %v, want ErrStale", d, err)
		}
	}
	noTime := []byte(`{"event_id":"x"}`)
	h2 := http.Header{}
	h2.Set(webhook.HeaderE2BSignature, events.E2BSignature(secret, noTime))
	for name, err := range map[string]error{
		"secret":  webhook.VerifyE2B(h, body, secret+"x", at),
		"body":    webhook.VerifyE2B(h, []byte(`{"event_id":"y","occurred_at_ms":1767225600000}`), secret, at),
		"no time": webhook.VerifyE2B(h2, noTime, secret, at),
		"none":    webhook.VerifyE2B(http.Header{}, body, secret, at),
	} {
		if !errors.Is(err, webhook.ErrSignature) {
			t.Errorf("%s: %v, want ErrSignature", name, err)
		}
	}
}
