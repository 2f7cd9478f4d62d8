package events

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

type sigVectors struct {
	Cases []struct {
		Secret                  string `json:"secret"`
		WebhookID               string `json:"webhook_id"`
		Body                    string `json:"body"`
		Unix                    int64  `json:"unix"`
		ExpectedE2BSignature    string `json:"expected_e2b_signature"`
		ExpectedRayitoSignature string `json:"expected_rayito_signature"`
	} `json:"cases"`
}

func TestWebhookSignatureVectors(t *testing.T) {
	var v sigVectors
	loadJSON(t, "webhook-signatures.json", &v)
	if len(v.Cases) < 3 {
		t.Fatalf("%d cases", len(v.Cases))
	}
	for i, c := range v.Cases {
		body := []byte(c.Body)
		if got := E2BSignature(c.Secret, body); got != c.ExpectedE2BSignature {
			t.Errorf("case %d: E2BSignature = %s, want %s", i, got, c.ExpectedE2BSignature)
		}
		at := time.Unix(c.Unix, 0)
		if got := RayitoSignature(c.Secret, c.WebhookID, body, at); got != c.ExpectedRayitoSignature {
			t.Errorf("case %d: RayitoSignature = %s, want %s", i, got, c.ExpectedRayitoSignature)
		}
		h := http.Header{}
		h.Set(HeaderRayitoSignature, c.ExpectedRayitoSignature)
		h.Set(HeaderE2BSignature, c.ExpectedE2BSignature)
		if err := VerifyWebhook(h, body, c.Secret, c.WebhookID, at.Add(299*time.Second)); err != nil {
			t.Errorf("case %d: VerifyWebhook: %v", i, err)
		}
		if err := VerifyE2BSignature(h, body, c.Secret); err != nil {
			t.Errorf("case %d: VerifyE2BSignature: %v", i, err)
		}
	}
}

func TestVerifyWebhook(t *testing.T) {
	const secret, id = "whsec_0123456789abcdef0123456789abcdef", "wh_1"
	body := []byte(`{"event_id":"0123456789abcdef0123456789abcdef"}`)
	now := time.Unix(1767225600, 0)
	sig := RayitoSignature(secret, id, body, now)
	hdr := func(vals ...string) http.Header {
		h := http.Header{}
		for _, v := range vals {
			h.Add(HeaderRayitoSignature, v)
		}
		return h
	}
	ok := func(h http.Header, at time.Time) {
		t.Helper()
		if err := VerifyWebhook(h, body, secret, id, at); err != nil {
			t.Errorf("VerifyWebhook: %v", err)
		}
	}
	ok(hdr(sig), now)
	ok(hdr(sig), now.Add(MaxSkew))
	ok(hdr(sig), now.Add(-MaxSkew))
	ok(hdr(" "+strings.ReplaceAll(sig, ",", " , ")+" "), now)
	// Rotation: several v1 entries, one signed with the current secret.
	oldSig := RayitoSignature("old-secret", id, body, now)
	ok(hdr(oldSig+","+sig[strings.Index(sig, "v1="):]), now)
	ok(hdr(sig+","+oldSig[strings.Index(oldSig, "v1="):]), now)
	// Unknown keys are ignored (a later scheme beside v1).
	ok(hdr(sig+",v2=abc"), now)
	// Upper-case hex.
	ok(hdr("t="+strconv.FormatInt(now.Unix(), 10)+",v1="+strings.ToUpper(sig[strings.Index(sig, "v1=")+3:])), now)

	stale := map[string]time.Time{
		"6 min later":   now.Add(MaxSkew + time.Second),
		"6 min earlier": now.Add(-MaxSkew - time.Second),
		"a day later":   now.Add(24 * time.Hour),
	}
	for name, at := range stale {
		if err := VerifyWebhook(hdr(sig), body, secret, id, at); !errors.Is(err, ErrStale) {
			t.Errorf("%s: %v, want ErrStale", name, err)
		}
	}

	v1 := sig[strings.Index(sig, "v1=")+3:]
	ts := strconv.FormatInt(now.Unix(), 10)
	bad := map[string]http.Header{
		"no header":           {},
		"two headers":         hdr(sig, sig),
		"empty":               hdr(""),
		"no t":                hdr("v1=" + v1),
		"no v1":               hdr("t=" + ts),
		"two t":               hdr("t=" + ts + ",t=" + ts + ",v1=" + v1),
		"negative t":          hdr("t=-" + ts + ",v1=" + v1),
		"t not a number":      hdr("t=" + ts + "x,v1=" + v1),
		"t moved":             hdr("t=" + strconv.FormatInt(now.Unix()+1, 10) + ",v1=" + v1),
		"short v1":            hdr("t=" + ts + ",v1=" + v1[:62]),
		"non-hex v1":          hdr("t=" + ts + ",v1=" + strings.Repeat("z", 64)),
		"wrong v1":            hdr("t=" + ts + ",v1=" + strings.Repeat("0", 64)),
		"entry without =":     hdr(sig + ",junk"),
		"e2b-signature alone": {HeaderE2BSignature: {E2BSignature(secret, body)}},
		"too long":            hdr(sig + "," + strings.Repeat("x=y,", 300)),
		"too many entries":    hdr(sig + strings.Repeat(",v1="+strings.Repeat("0", 64), 16)),
	}
	for name, h := range bad {
		if err := VerifyWebhook(h, body, secret, id, now); !errors.Is(err, ErrSignature) {
			t.Errorf("%s: %v, want ErrSignature", name, err)
		}
	}
	// The signature binds the body, the secret and the webhook id.
	for name, err := range map[string]error{
		"other body":    VerifyWebhook(hdr(sig), append(body, ' '), secret, id, now),
		"other secret":  VerifyWebhook(hdr(sig), body, secret+"x", id, now),
		"other webhook": VerifyWebhook(hdr(sig), body, secret, "wh_2", now),
	} {
		if !errors.Is(err, ErrSignature) {
			t.Errorf("%s: %v, want ErrSignature", name, err)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error holds the secret", name)
		}
	}
	// A stale timestamp with a wrong signature is a signature error: the
	// time is not trusted before the MAC is.
	if err := VerifyWebhook(hdr("t=1,v1="+v1), body, secret, id, now); !errors.Is(err, ErrSignature) {
		t.Errorf("forged old t: %v", err)
	}
}

func TestVerifyE2BSignature(t *testing.T) {
	body := []byte("{}")
	h := http.Header{}
	h.Set(HeaderE2BSignature, E2BSignature("s", body))
	if err := VerifyE2BSignature(h, body, "s"); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Header{
		"missing": {},
		"padded":  {"E2b-Signature": {E2BSignature("s", body) + "="}},
		"wrong":   {"E2b-Signature": {E2BSignature("t", body)}},
		"two":     {"E2b-Signature": {E2BSignature("s", body), E2BSignature("s", body)}},
	} {
		if err := VerifyE2BSignature(h, body, "s"); !errors.Is(err, ErrSignature) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestWebhookBody: the one body shape, its JSON to the byte (receivers
// parse it; the deliverers of the stack and of the local platform send it).
func TestWebhookBody(t *testing.T) {
	ev := Event{EventID: "0123456789abcdef0123456789abcdef", SandboxID: "sbx-1", Type: Killed, KillReason: KillTimeout, Generation: 3, OccurredAtMs: 1764806400000, ImageARN: "arn:aws:lambda:us-east-1:123456789012:image:base"}
	b, err := json.Marshal(NewWebhookBody(ev))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"event_id":"0123456789abcdef0123456789abcdef","sandbox_id":"sbx-1","type":"sandbox.lifecycle.killed","kill_reason":"timeout","generation":3,"occurred_at_ms":1764806400000,"template_id":"arn:aws:lambda:us-east-1:123456789012:image:base"}`
	if string(b) != want {
		t.Fatalf("body\n got %s\nwant %s", b, want)
	}
	ev = Event{EventID: ev.EventID, SandboxID: "sbx-1", Type: Created, Generation: 1, OccurredAtMs: 1, ExecutionID: "x"}
	b, _ = json.Marshal(NewWebhookBody(ev))
	if want := `{"event_id":"0123456789abcdef0123456789abcdef","sandbox_id":"sbx-1","type":"sandbox.lifecycle.created","generation":1,"occurred_at_ms":1,"template_id":"","execution_id":"x"}`; string(b) != want {
		t.Fatalf("created body %s", b)
	}
}
