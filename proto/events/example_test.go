package events_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/rayito-dev/rayito/proto/events"
)

func ExampleDecode() {
	stackKey := bytes.Repeat([]byte{1}, 32)
	key := events.SandboxKey(stackKey, "sbx-1")
	line, _ := events.Encode(key, events.Event{
		EventID:      "0123456789abcdef0123456789abcdef",
		SandboxID:    "sbx-1",
		Type:         events.Killed,
		KillReason:   events.KillTimeout,
		Generation:   4,
		OccurredAtMs: 1767225600000,
	})
	ev, _, err := events.Decode(key, line)
	fmt.Println(ev.Type, ev.KillReason, ev.Generation, err)

	_, _, err = events.Decode(events.SandboxKey(stackKey, "sbx-2"), line)
	fmt.Println(errors.Is(err, events.ErrMAC))
	// Output:
	// killed timeout 4 <nil>
	// true
}

func ExampleVerifyWebhook() {
	body := []byte(`{"event_id":"0123456789abcdef0123456789abcdef","type":"sandbox.lifecycle.killed"}`)
	sent := time.Unix(1767225600, 0)
	h := http.Header{}
	h.Set(events.HeaderRayitoSignature, events.RayitoSignature("whsec_secret", "wh_1", body, sent))
	h.Set(events.HeaderE2BSignature, events.E2BSignature("whsec_secret", body))

	fmt.Println(events.VerifyWebhook(h, body, "whsec_secret", "wh_1", sent.Add(time.Minute)))
	err := events.VerifyWebhook(h, body, "whsec_secret", "wh_1", sent.Add(6*time.Minute))
	fmt.Println(errors.Is(err, events.ErrStale))
	err = events.VerifyWebhook(h, body, "whsec_secret", "wh_2", sent)
	fmt.Println(errors.Is(err, events.ErrSignature))
	// Output:
	// <nil>
	// true
	// true
}

func ExampleCheckWebhookURL() {
	for _, raw := range []string{"https://1.2.65535/hook", "https://0x7f.1/hook", "http://example.com/hook"} {
		u, err := events.CheckWebhookURL(raw)
		switch {
		case errors.Is(err, events.ErrBlockedURL):
			fmt.Println("blocked")
		case err != nil:
			fmt.Println("invalid")
		default:
			fmt.Println(u)
		}
	}
	// Output:
	// https://1.2.255.255/hook
	// blocked
	// invalid
}
