package webhook_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/rayito-dev/rayito/proto/events"
	"github.com/rayito-dev/rayito/sdk/webhook"
)

// A receiver: read the raw body, verify rayito-signature, then parse.
func Example() {
	const secret, webhookID = "0123456789abcdef0123456789abcdef", "wh_example"
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, "read", http.StatusBadRequest)
			return
		}
		switch err := webhook.Verify(r.Header, body, secret, webhookID, time.Now()); {
		case errors.Is(err, webhook.ErrStale):
			http.Error(w, "stale", http.StatusUnauthorized)
			return
		case err != nil:
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var ev webhook.Event
		if json.Unmarshal(body, &ev) != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		// Deduplicate by (ev.SandboxID, ev.EventID), then act.
		fmt.Println(ev.Type, ev.SandboxID)
		w.WriteHeader(http.StatusNoContent)
	})

	// What the platform sends (signed here for the example).
	body := `{"event_id":"0123456789abcdef0123456789abcdef","sandbox_id":"sbx-1","type":"sandbox.lifecycle.created","generation":1,"occurred_at_ms":1767225600000,"template_id":""}`
	send := func(at time.Time) int {
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
		req.Header.Set(webhook.HeaderSignature, events.RayitoSignature(secret, webhookID, []byte(body), at))
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		return rec.Code
	}
	fmt.Println(send(time.Now()))
	fmt.Println(send(time.Now().Add(-10 * time.Minute))) // a replay
	// Output:
	// sandbox.lifecycle.created sbx-1
	// 204
	// 401
}
