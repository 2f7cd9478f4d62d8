package events

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

const (
	// LinePrefix is the first field of every event line.
	LinePrefix = "rayito.event.v1"

	// KeyDomain prefixes the sandbox id in the per-sandbox key derivation.
	KeyDomain = "rayito.events.v1|"

	// KeySize is the size of a per-sandbox key (the output of SandboxKey).
	KeySize = sha256.Size

	// MACSize is the size of an event line's MAC.
	MACSize = sha256.Size

	// MaxLineLen is the longest line Decode accepts, in bytes, without the
	// line terminator (which is not part of a line).
	MaxLineLen = 4096

	// EventIDLen is the length of an event id: 16 random bytes in lowercase
	// hex.
	EventIDLen = 32

	// MaxSandboxIDLen, MaxImageARNLen and MaxExecutionIDLen bound the string
	// fields, so that every valid event fits in a line.
	MaxSandboxIDLen   = 128
	MaxImageARNLen    = 1024
	MaxExecutionIDLen = 128
)

var (
	// ErrMalformed reports a line that is not three single-space separated
	// fields with the prefix, canonical unpadded base64url and a 32-byte
	// MAC, or that is longer than MaxLineLen.
	ErrMalformed = errors.New("events: malformed line")

	// ErrMAC reports a line whose MAC does not verify with the key.
	ErrMAC = errors.New("events: MAC mismatch")

	// ErrInvalidEvent reports an event that breaks the field rules (see
	// Event.Validate), or a signed payload that is not a strict JSON
	// encoding of one.
	ErrInvalidEvent = errors.New("events: invalid event")

	// ErrKey reports a per-sandbox key that is not KeySize bytes.
	ErrKey = errors.New("events: key must be 32 bytes")
)

// Type is the kind of a lifecycle event.
type Type string

// The lifecycle event types.
const (
	Created Type = "created"
	Paused  Type = "paused"
	Resumed Type = "resumed"
	Killed  Type = "killed"
)

// Valid reports whether t is one of the four event types.
func (t Type) Valid() bool {
	switch t {
	case Created, Paused, Resumed, Killed:
		return true
	}
	return false
}

// KillReason says why a sandbox was killed; only a Killed event has one.
type KillReason string

// The kill reasons.
const (
	KillRequest KillReason = "request" // a terminate asked for by a caller
	KillTimeout KillReason = "timeout" // the sandbox's lifecycle deadline
	KillUnknown KillReason = "unknown" // anything else, e.g. found gone
)

// Valid reports whether r is one of the three kill reasons.
func (r KillReason) Valid() bool {
	switch r {
	case KillRequest, KillTimeout, KillUnknown:
		return true
	}
	return false
}

// Event is one lifecycle event. Its JSON encoding (json.Marshal) is the
// signed payload of a line; the field order is part of the format.
type Event struct {
	// EventID is EventIDLen lowercase hex digits, fresh per event
	// (NewEventID).
	EventID string `json:"event_id"`
	// SandboxID names the sandbox: 1 to MaxSandboxIDLen characters of
	// [A-Za-z0-9._:-].
	SandboxID string `json:"sandbox_id"`
	// Type is the kind of event.
	Type Type `json:"type"`
	// KillReason is set on Killed events only.
	KillReason KillReason `json:"kill_reason,omitempty"`
	// Generation numbers one sandbox's events from 1, increasing.
	Generation uint64 `json:"generation"`
	// OccurredAtMs is the wall-clock time of the event in Unix milliseconds.
	OccurredAtMs int64 `json:"occurred_at_ms"`
	// ImageARN is the image the sandbox runs; it may be empty (locally).
	ImageARN string `json:"image_arn"`
	// ExecutionID is optional.
	ExecutionID string `json:"execution_id,omitempty"`
}

// NewEventID returns a fresh event id: 16 bytes from crypto/rand in
// lowercase hex.
func NewEventID() (string, error) {
	var b [EventIDLen / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("events: reading random bytes: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// SandboxKey derives the per-sandbox key from the stack key:
// HMAC-SHA256(stackKey, KeyDomain+sandboxID).
func SandboxKey(stackKey []byte, sandboxID string) []byte {
	m := hmac.New(sha256.New, stackKey)
	m.Write([]byte(KeyDomain))
	m.Write([]byte(sandboxID))
	return m.Sum(nil)
}

// Validate checks the field rules; its errors wrap ErrInvalidEvent and name
// the field, never its value.
func (ev Event) Validate() error {
	if !validEventID(ev.EventID) {
		return invalid("event_id must be 32 lowercase hex digits")
	}
	if !validID(ev.SandboxID, MaxSandboxIDLen) {
		return invalid("sandbox_id must be 1 to 128 characters of [A-Za-z0-9._:-]")
	}
	if !ev.Type.Valid() {
		return invalid("type must be created, paused, resumed or killed")
	}
	if ev.Type == Killed {
		if !ev.KillReason.Valid() {
			return invalid("kill_reason must be request, timeout or unknown on a killed event")
		}
	} else if ev.KillReason != "" {
		return invalid("kill_reason is only allowed on a killed event")
	}
	if ev.Generation < 1 {
		return invalid("generation must be at least 1")
	}
	if ev.OccurredAtMs <= 0 {
		return invalid("occurred_at_ms must be positive")
	}
	if len(ev.ImageARN) > MaxImageARNLen || !printableASCII(ev.ImageARN) {
		return invalid("image_arn must be at most 1024 printable ASCII characters")
	}
	if ev.ExecutionID != "" && !validID(ev.ExecutionID, MaxExecutionIDLen) {
		return invalid("execution_id must be 1 to 128 characters of [A-Za-z0-9._:-]")
	}
	return nil
}

func invalid(msg string) error { return fmt.Errorf("%w: %s", ErrInvalidEvent, msg) }

func malformed(msg string) error { return fmt.Errorf("%w: %s", ErrMalformed, msg) }

func validEventID(s string) bool {
	if len(s) != EventIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func validID(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == ':', c == '-':
		default:
			return false
		}
	}
	return true
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// Encode validates ev and returns its line, without a line terminator:
// LinePrefix, base64url(json), base64url(HMAC-SHA256(key, json)).
func Encode(key []byte, ev Event) (line string, err error) {
	if len(key) != KeySize {
		return "", ErrKey
	}
	if err := ev.Validate(); err != nil {
		return "", err
	}
	js, err := json.Marshal(ev)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	return encodeRaw(key, js)
}

// encodeRaw signs JSON bytes as they are and builds the line.
func encodeRaw(key, js []byte) (string, error) {
	m := hmac.New(sha256.New, key)
	m.Write(js)
	var b strings.Builder
	enc := base64.RawURLEncoding
	b.Grow(len(LinePrefix) + 2 + enc.EncodedLen(len(js)) + enc.EncodedLen(MACSize))
	b.WriteString(LinePrefix)
	b.WriteByte(' ')
	b.WriteString(enc.EncodeToString(js))
	b.WriteByte(' ')
	b.WriteString(enc.EncodeToString(m.Sum(nil)))
	if b.Len() > MaxLineLen {
		return "", invalid("line longer than 4096 bytes")
	}
	return b.String(), nil
}

var strictB64 = base64.RawURLEncoding.Strict()

// decodeField decodes one strict, canonical, unpadded base64url field.
func decodeField(s string) ([]byte, bool) {
	if s == "" {
		return nil, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, false // also refuses '=', '\r' and '\n', which Decode would skip
		}
	}
	b, err := strictB64.DecodeString(s)
	if err != nil {
		return nil, false
	}
	return b, true
}

// Decode verifies and parses one line (without its line terminator) with
// the per-sandbox key. It returns the event and the exact JSON bytes the
// MAC covers. The MAC is checked, in constant time, before the JSON is
// read. Errors wrap ErrKey, ErrMalformed, ErrMAC or ErrInvalidEvent and
// never quote the line.
func Decode(key []byte, line string) (Event, []byte, error) {
	if len(key) != KeySize {
		return Event{}, nil, ErrKey
	}
	if len(line) > MaxLineLen {
		return Event{}, nil, malformed("line longer than 4096 bytes")
	}
	prefix, rest, ok := strings.Cut(line, " ")
	if !ok || prefix != LinePrefix {
		return Event{}, nil, malformed("missing prefix")
	}
	payload, sig, ok := strings.Cut(rest, " ")
	if !ok || strings.Contains(sig, " ") {
		return Event{}, nil, malformed("want exactly three space-separated fields")
	}
	js, ok := decodeField(payload)
	if !ok {
		return Event{}, nil, malformed("payload is not unpadded base64url")
	}
	mac, ok := decodeField(sig)
	if !ok {
		return Event{}, nil, malformed("MAC is not unpadded base64url")
	}
	if len(mac) != MACSize {
		return Event{}, nil, malformed("MAC is not 32 bytes")
	}
	m := hmac.New(sha256.New, key)
	m.Write(js)
	if !hmac.Equal(m.Sum(nil), mac) {
		return Event{}, nil, ErrMAC
	}
	ev, err := parseEvent(js)
	if err != nil {
		return Event{}, nil, err
	}
	return ev, js, nil
}

// parseEvent is the strict JSON parse of a signed payload: one object,
// known fields only, no duplicates, exact types, nothing after it.
func parseEvent(js []byte) (Event, error) {
	if !utf8.Valid(js) {
		return Event{}, invalid("payload is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return Event{}, invalid("payload is not a JSON object")
	}
	var ev Event
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Event{}, invalid("payload is not a JSON object")
		}
		name, ok := tok.(string)
		if !ok {
			return Event{}, invalid("payload is not a JSON object")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return Event{}, invalid("payload is not a JSON object")
		}
		if seen[name] {
			return Event{}, invalid("duplicate field")
		}
		seen[name] = true
		var target any
		switch name {
		case "event_id":
			target = &ev.EventID
		case "sandbox_id":
			target = &ev.SandboxID
		case "type":
			target = &ev.Type
		case "kill_reason":
			target = &ev.KillReason
		case "generation":
			target = &ev.Generation
		case "occurred_at_ms":
			target = &ev.OccurredAtMs
		case "image_arn":
			target = &ev.ImageARN
		case "execution_id":
			target = &ev.ExecutionID
		default:
			return Event{}, invalid("unknown field")
		}
		if !typeMatches(name, raw) || json.Unmarshal(raw, target) != nil {
			return Event{}, invalid("field " + name + " has the wrong type")
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return Event{}, invalid("payload is not a JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return Event{}, invalid("data after the JSON object")
	}
	for _, f := range [...]string{"event_id", "sandbox_id", "type", "generation", "occurred_at_ms", "image_arn"} {
		if !seen[f] {
			return Event{}, invalid("missing field " + f)
		}
	}
	if seen["kill_reason"] && ev.KillReason == "" {
		return Event{}, invalid("kill_reason must not be empty when present")
	}
	if seen["execution_id"] && ev.ExecutionID == "" {
		return Event{}, invalid("execution_id must not be empty when present")
	}
	if err := ev.Validate(); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// typeMatches refuses what json.Unmarshal would quietly accept: null for
// any field, and numbers that are not plain non-negative integers (an
// exponent or fraction, a minus sign) for the two integer fields.
func typeMatches(name string, raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	switch name {
	case "generation", "occurred_at_ms":
		for _, c := range raw {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	default:
		return raw[0] == '"'
	}
}
