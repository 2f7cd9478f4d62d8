package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Webhook header names (http.Header canonicalizes them when set or read).
const (
	HeaderWebhookID        = "e2b-webhook-id"
	HeaderDeliveryID       = "e2b-delivery-id"
	HeaderSignatureVersion = "e2b-signature-version"
	HeaderE2BSignature     = "e2b-signature"
	HeaderRayitoSignature  = "rayito-signature"

	// SignatureVersion is the value of e2b-signature-version.
	SignatureVersion = "v1"
)

// MaxSkew is how far a rayito-signature's timestamp may be from the
// receiver's clock, either way.
const MaxSkew = 5 * time.Minute

// maxSignatureHeaderLen and maxSignatureEntries bound the parse of a
// rayito-signature header.
const (
	maxSignatureHeaderLen = 1024
	maxSignatureEntries   = 16
)

var (
	// ErrSignature reports a missing, malformed or wrong signature.
	ErrSignature = errors.New("events: webhook signature invalid")

	// ErrStale reports a correctly signed rayito-signature whose timestamp
	// is more than MaxSkew away from now.
	ErrStale = errors.New("events: webhook signature outside the 5-minute window")
)

// E2BSignature is E2B's webhook signature: the unpadded standard base64 of
// SHA-256(secret || body). It carries no timestamp (see the package doc).
func E2BSignature(secret string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(secret))
	h.Write(body)
	return base64.RawStdEncoding.EncodeToString(h.Sum(nil))
}

// RayitoSignature is the rayito-signature header value for a delivery made
// at t: "t=<unix>,v1=<hex HMAC-SHA256(secret, "<unix>.<webhookID>." || body)>".
func RayitoSignature(secret, webhookID string, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(rayitoMAC(secret, webhookID, ts, body))
}

func rayitoMAC(secret, webhookID, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write([]byte(webhookID))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// VerifyWebhook checks a delivery's rayito-signature header against the raw
// body, the webhook's secret and its id: the header must be present once,
// hold one t= (Unix seconds) and one or more v1= entries (several while the
// sender rotates secrets; other keys are ignored), one v1 must match
// (constant-time compare), and t must be within MaxSkew of now. It returns
// nil, or an error wrapping ErrSignature or ErrStale.
//
// The e2b-signature header is not accepted on its own: it signs no time,
// so it cannot bound a replay (see the package doc and VerifyE2BSignature).
// A replay inside the window verifies; deduplicate by the body's event_id.
func VerifyWebhook(h http.Header, body []byte, secret, webhookID string, now time.Time) error {
	vals := h.Values(HeaderRayitoSignature)
	if len(vals) != 1 {
		return sigErr("want exactly one rayito-signature header")
	}
	v := vals[0]
	if len(v) > maxSignatureHeaderLen {
		return sigErr("rayito-signature header too long")
	}
	var ts string
	var sigs [][]byte
	parts := strings.Split(v, ",")
	if len(parts) > maxSignatureEntries {
		return sigErr("too many rayito-signature entries")
	}
	for _, p := range parts {
		k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok {
			return sigErr("malformed rayito-signature entry")
		}
		switch k {
		case "t":
			if ts != "" || !validUnix(val) {
				return sigErr("want one numeric t= in rayito-signature")
			}
			ts = val
		case "v1":
			if len(val) != 2*sha256.Size {
				return sigErr("v1 must be 64 hex digits")
			}
			b, err := hex.DecodeString(val)
			if err != nil {
				return sigErr("v1 must be 64 hex digits")
			}
			sigs = append(sigs, b)
		}
	}
	if ts == "" || len(sigs) == 0 {
		return sigErr("rayito-signature needs t= and v1=")
	}
	want := rayitoMAC(secret, webhookID, ts, body)
	match := 0
	for _, s := range sigs {
		match |= subtle.ConstantTimeCompare(want, s)
	}
	if match != 1 {
		return sigErr("no v1 signature matches")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return sigErr("want one numeric t= in rayito-signature")
	}
	d := now.Sub(time.Unix(sec, 0))
	if d > MaxSkew || d < -MaxSkew {
		return ErrStale
	}
	return nil
}

// VerifyE2BSignature checks only the e2b-signature header (E2B's scheme)
// in constant time, returning nil or an error wrapping ErrSignature. It
// says nothing about freshness: a receiver that relies on it alone must
// refuse old occurred_at_ms values and remember accepted event_ids (see
// the package doc). Prefer VerifyWebhook.
func VerifyE2BSignature(h http.Header, body []byte, secret string) error {
	vals := h.Values(HeaderE2BSignature)
	if len(vals) != 1 {
		return sigErr("want exactly one e2b-signature header")
	}
	want := E2BSignature(secret, body)
	if subtle.ConstantTimeCompare([]byte(want), []byte(vals[0])) != 1 {
		return sigErr("e2b-signature does not match")
	}
	return nil
}

func sigErr(msg string) error { return fmt.Errorf("%w: %s", ErrSignature, msg) }

func validUnix(s string) bool {
	if s == "" || len(s) > 12 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
