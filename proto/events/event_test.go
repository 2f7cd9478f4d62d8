package events

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

type macVectors struct {
	DomainSeparator string `json:"domain_separator"`
	KeyDerivation   []struct {
		StackKeyHex     string `json:"stack_key_hex"`
		SandboxID       string `json:"sandbox_id"`
		ExpectedKSbxHex string `json:"expected_k_sbx_hex"`
	} `json:"key_derivation"`
	EventMAC []struct {
		KSbxHex        string `json:"k_sbx_hex"`
		EventJSON      string `json:"event_json"`
		ExpectedMACHex string `json:"expected_mac_hex"`
		ExpectedLine   string `json:"expected_line"`
	} `json:"event_mac"`
}

func loadJSON(t testing.TB, name string, v any) {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestMACVectors(t *testing.T) {
	var v macVectors
	loadJSON(t, "mac-vectors.json", &v)
	if v.DomainSeparator != KeyDomain {
		t.Fatalf("domain separator %q, want %q", v.DomainSeparator, KeyDomain)
	}
	if len(v.KeyDerivation) < 3 || len(v.EventMAC) < 3 {
		t.Fatalf("want 3 + 3 vectors, have %d + %d", len(v.KeyDerivation), len(v.EventMAC))
	}
	for _, c := range v.KeyDerivation {
		got := hex.EncodeToString(SandboxKey(unhex(t, c.StackKeyHex), c.SandboxID))
		if got != c.ExpectedKSbxHex {
			t.Errorf("SandboxKey(%s) = %s, want %s", c.SandboxID, got, c.ExpectedKSbxHex)
		}
	}
	for i, c := range v.EventMAC {
		key := unhex(t, c.KSbxHex)
		var ev Event
		if err := json.Unmarshal([]byte(c.EventJSON), &ev); err != nil {
			t.Fatal(err)
		}
		line, err := Encode(key, ev)
		if err != nil {
			t.Fatalf("vector %d: Encode: %v", i, err)
		}
		if line != c.ExpectedLine {
			t.Errorf("vector %d: Encode =\n%s\nwant\n%s", i, line, c.ExpectedLine)
		}
		f := strings.Split(line, " ")
		mac, _ := base64.RawURLEncoding.DecodeString(f[2])
		if hex.EncodeToString(mac) != c.ExpectedMACHex {
			t.Errorf("vector %d: MAC %x, want %s", i, mac, c.ExpectedMACHex)
		}
		got, js, err := Decode(key, c.ExpectedLine)
		if err != nil {
			t.Fatalf("vector %d: Decode: %v", i, err)
		}
		if got != ev || string(js) != c.EventJSON {
			t.Errorf("vector %d: Decode = %+v %s", i, got, js)
		}
	}
}

// TestMACVectorsPython recomputes every vector with Python's hmac, hashlib
// and base64: an implementation independent of this package.
func TestMACVectorsPython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH: the Python cross-check of the MAC and signature vectors is skipped")
	}
	const script = `
import base64, hashlib, hmac, json, sys
v = json.load(open("testdata/mac-vectors.json"))
dom = v["domain_separator"].encode()
for c in v["key_derivation"]:
    k = hmac.new(bytes.fromhex(c["stack_key_hex"]), dom + c["sandbox_id"].encode(), hashlib.sha256).hexdigest()
    assert k == c["expected_k_sbx_hex"], ("key", c["sandbox_id"])
b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
for c in v["event_mac"]:
    js = c["event_json"].encode()
    mac = hmac.new(bytes.fromhex(c["k_sbx_hex"]), js, hashlib.sha256).digest()
    assert mac.hex() == c["expected_mac_hex"], "mac"
    assert "rayito.event.v1 " + b64(js) + " " + b64(mac) == c["expected_line"], "line"
w = json.load(open("testdata/webhook-signatures.json"))
for c in w["cases"]:
    sec, body = c["secret"].encode(), c["body"].encode()
    e2b = base64.b64encode(hashlib.sha256(sec + body).digest()).decode().rstrip("=")
    assert e2b == c["expected_e2b_signature"], "e2b"
    msg = ("%d.%s." % (c["unix"], c["webhook_id"])).encode() + body
    ray = "t=%d,v1=%s" % (c["unix"], hmac.new(sec, msg, hashlib.sha256).hexdigest())
    assert ray == c["expected_rayito_signature"], "rayito"
print("ok")
`
	out, err := exec.Command(py, "-c", script).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("python cross-check: %v\n%s", err, out)
	}
}

var testKey = bytes.Repeat([]byte{7}, KeySize)

func validEvent() Event {
	return Event{
		EventID:      "0123456789abcdef0123456789abcdef",
		SandboxID:    "sbx-1",
		Type:         Killed,
		KillReason:   KillRequest,
		Generation:   3,
		OccurredAtMs: 1767225600000,
		ImageARN:     "arn:aws:lambda:us-east-1:123456789012:microvm-image:x:1",
		ExecutionID:  "e-1",
	}
}

func TestRoundTrip(t *testing.T) {
	for _, ev := range []Event{
		validEvent(),
		{EventID: strings.Repeat("a", 32), SandboxID: "x", Type: Created, Generation: 1, OccurredAtMs: 1},
		{EventID: strings.Repeat("0", 32), SandboxID: strings.Repeat("Z", 128), Type: Resumed, Generation: ^uint64(0), OccurredAtMs: 1<<63 - 1, ImageARN: strings.Repeat("~", 1024), ExecutionID: strings.Repeat("e", 128)},
	} {
		line, err := Encode(testKey, ev)
		if err != nil {
			t.Fatal(err)
		}
		if len(line) > MaxLineLen {
			t.Fatalf("line of %d bytes", len(line))
		}
		got, js, err := Decode(testKey, line)
		if err != nil || got != ev {
			t.Fatalf("Decode = %+v, %v; want %+v", got, err, ev)
		}
		want, _ := json.Marshal(ev)
		if !bytes.Equal(js, want) {
			t.Fatalf("json %s, want %s", js, want)
		}
	}
}

func TestNewEventID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id, err := NewEventID()
		if err != nil {
			t.Fatal(err)
		}
		if !validEventID(id) || seen[id] {
			t.Fatalf("bad or repeated id %q", id)
		}
		seen[id] = true
	}
}

func TestEncodeRefuses(t *testing.T) {
	mod := func(f func(*Event)) Event { ev := validEvent(); f(&ev); return ev }
	cases := map[string]Event{
		"short event id":          mod(func(e *Event) { e.EventID = "0123" }),
		"upper-case event id":     mod(func(e *Event) { e.EventID = strings.Repeat("A", 32) }),
		"empty sandbox id":        mod(func(e *Event) { e.SandboxID = "" }),
		"sandbox id with /":       mod(func(e *Event) { e.SandboxID = "a/b" }),
		"long sandbox id":         mod(func(e *Event) { e.SandboxID = strings.Repeat("a", 129) }),
		"bad type":                mod(func(e *Event) { e.Type = "exploded" }),
		"killed without reason":   mod(func(e *Event) { e.KillReason = "" }),
		"killed with bad reason":  mod(func(e *Event) { e.KillReason = "oom" }),
		"reason on created":       mod(func(e *Event) { e.Type = Created }),
		"generation 0":            mod(func(e *Event) { e.Generation = 0 }),
		"time 0":                  mod(func(e *Event) { e.OccurredAtMs = 0 }),
		"negative time":           mod(func(e *Event) { e.OccurredAtMs = -5 }),
		"arn with newline":        mod(func(e *Event) { e.ImageARN = "arn\n" }),
		"long arn":                mod(func(e *Event) { e.ImageARN = strings.Repeat("a", 1025) }),
		"execution id with space": mod(func(e *Event) { e.ExecutionID = "a b" }),
	}
	for name, ev := range cases {
		if _, err := Encode(testKey, ev); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("%s: Encode error %v, want ErrInvalidEvent", name, err)
		}
	}
	if _, err := Encode(testKey[:16], validEvent()); !errors.Is(err, ErrKey) {
		t.Errorf("short key: %v", err)
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func sign(key []byte, js string) string {
	line, err := encodeRaw(key, []byte(js))
	if err != nil {
		panic(err)
	}
	return line
}

func TestDecodeRefuses(t *testing.T) {
	good, err := Encode(testKey, validEvent())
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(good, " ")
	other := bytes.Repeat([]byte{8}, KeySize)
	otherLine, _ := Encode(other, validEvent())
	flipped := []byte(f[1])
	flipped[10] ^= 1
	malformedCases := map[string]string{
		"empty":              "",
		"prefix only":        LinePrefix,
		"two fields":         f[0] + " " + f[1],
		"four fields":        good + " x",
		"double space":       f[0] + "  " + f[1] + " " + f[2],
		"trailing space":     good + " ",
		"leading space":      " " + good,
		"tab separator":      f[0] + "\t" + f[1] + " " + f[2],
		"trailing newline":   good + "\n",
		"trailing CR":        good + "\r",
		"wrong prefix":       "rayito.event.v2 " + f[1] + " " + f[2],
		"prefix case":        "RAYITO.EVENT.V1 " + f[1] + " " + f[2],
		"padded payload":     f[0] + " " + base64.URLEncoding.EncodeToString(mustB64(f[1])) + " " + f[2],
		"std alphabet mac":   f[0] + " " + f[1] + " " + f[2][:10] + "+" + f[2][11:],
		"std alphabet json":  f[0] + " " + f[1][:10] + "/" + f[1][11:] + " " + f[2],
		"padded mac":         f[0] + " " + f[1] + " " + f[2] + "=",
		"short mac":          f[0] + " " + f[1] + " " + f[2][:40],
		"long mac":           f[0] + " " + f[1] + " " + b64(strings.Repeat("m", 33)),
		"non-canonical tail": f[0] + " " + f[1] + " " + f[2][:42] + "J",
		"empty payload":      f[0] + "  " + f[2],
		"too long":           f[0] + " " + strings.Repeat("A", MaxLineLen) + " " + f[2],
		"newline in payload": f[0] + " " + f[1][:8] + "\n" + f[1][8:] + " " + f[2],
	}
	for name, line := range malformedCases {
		if _, _, err := Decode(testKey, line); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	macCases := map[string]string{
		"other key":        otherLine,
		"flipped payload":  f[0] + " " + string(flipped) + " " + f[2],
		"other mac":        f[0] + " " + f[1] + " " + strings.Split(otherLine, " ")[2],
		"unsigned garbage": f[0] + " " + b64("not json") + " " + f[2],
	}
	for name, line := range macCases {
		if _, _, err := Decode(testKey, line); !errors.Is(err, ErrMAC) {
			t.Errorf("%s: %v, want ErrMAC", name, err)
		}
	}
	const id = `"event_id":"0123456789abcdef0123456789abcdef"`
	const rest = `"sandbox_id":"s","type":"created","generation":1,"occurred_at_ms":5,"image_arn":""`
	invalidCases := map[string]string{
		"not json":            `not json`,
		"array":               `[1]`,
		"empty object":        `{}`,
		"trailing data":       `{` + id + `,` + rest + `} {}`,
		"trailing garbage":    `{` + id + `,` + rest + `}x`,
		"unknown field":       `{` + id + `,` + rest + `,"extra":1}`,
		"duplicate key":       `{` + id + `,` + id + `,` + rest + `}`,
		"duplicate type":      `{` + id + `,` + rest + `,"type":"paused"}`,
		"missing event_id":    `{` + rest + `}`,
		"missing image_arn":   `{` + id + `,"sandbox_id":"s","type":"created","generation":1,"occurred_at_ms":5}`,
		"missing generation":  `{` + id + `,"sandbox_id":"s","type":"created","occurred_at_ms":5,"image_arn":""}`,
		"string generation":   `{` + id + `,"sandbox_id":"s","type":"created","generation":"1","occurred_at_ms":5,"image_arn":""}`,
		"float generation":    `{` + id + `,"sandbox_id":"s","type":"created","generation":1.0,"occurred_at_ms":5,"image_arn":""}`,
		"exp generation":      `{` + id + `,"sandbox_id":"s","type":"created","generation":1e0,"occurred_at_ms":5,"image_arn":""}`,
		"negative time":       `{` + id + `,"sandbox_id":"s","type":"created","generation":1,"occurred_at_ms":-5,"image_arn":""}`,
		"huge generation":     `{` + id + `,"sandbox_id":"s","type":"created","generation":18446744073709551616,"occurred_at_ms":5,"image_arn":""}`,
		"generation 0":        `{` + id + `,"sandbox_id":"s","type":"created","generation":0,"occurred_at_ms":5,"image_arn":""}`,
		"null sandbox":        `{` + id + `,"sandbox_id":null,"type":"created","generation":1,"occurred_at_ms":5,"image_arn":""}`,
		"number sandbox":      `{` + id + `,"sandbox_id":5,"type":"created","generation":1,"occurred_at_ms":5,"image_arn":""}`,
		"object arn":          `{` + id + `,"sandbox_id":"s","type":"created","generation":1,"occurred_at_ms":5,"image_arn":{}}`,
		"bad type":            `{` + id + `,"sandbox_id":"s","type":"Created","generation":1,"occurred_at_ms":5,"image_arn":""}`,
		"upper event id":      `{"event_id":"0123456789ABCDEF0123456789ABCDEF",` + rest + `}`,
		"killed no reason":    `{` + id + `,"sandbox_id":"s","type":"killed","generation":1,"occurred_at_ms":5,"image_arn":""}`,
		"killed bad reason":   `{` + id + `,"sandbox_id":"s","type":"killed","kill_reason":"oom","generation":1,"occurred_at_ms":5,"image_arn":""}`,
		"reason on paused":    `{` + id + `,"sandbox_id":"s","type":"paused","kill_reason":"request","generation":1,"occurred_at_ms":5,"image_arn":""}`,
		"empty reason":        `{` + id + `,"sandbox_id":"s","type":"paused","kill_reason":"","generation":1,"occurred_at_ms":5,"image_arn":""}`,
		"empty execution id":  `{` + id + `,` + rest + `,"execution_id":""}`,
		"invalid utf-8":       `{` + id + `,"sandbox_id":"s","type":"created","generation":1,"occurred_at_ms":5,"image_arn":"` + "\xff" + `"}`,
		"escaped control arn": `{` + id + `,"sandbox_id":"s","type":"created","generation":1,"occurred_at_ms":5,"image_arn":"\u0000"}`,
	}
	for name, js := range invalidCases {
		_, _, err := Decode(testKey, sign(testKey, js))
		if !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("%s: %v, want ErrInvalidEvent", name, err)
		}
		if err != nil && strings.Contains(err.Error(), js) {
			t.Errorf("%s: error quotes the payload", name)
		}
	}
	// Whitespace and another field order are valid JSON for the same event:
	// the MAC covers the bytes as sent, and Decode returns them unchanged.
	ok := `{ "type":"created", ` + id + `,"sandbox_id":"s","generation":1,"occurred_at_ms":5,"image_arn":"" }`
	ev, js, err := Decode(testKey, sign(testKey, ok))
	if err != nil || ev.Type != Created || string(js) != ok {
		t.Errorf("reordered JSON: %+v %v", ev, err)
	}
	if _, _, err := Decode(testKey[:31], good); !errors.Is(err, ErrKey) {
		t.Errorf("short key: %v", err)
	}
}

func mustB64(s string) []byte {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzDecode(f *testing.F) {
	var v macVectors
	if b, err := os.ReadFile("testdata/mac-vectors.json"); err == nil {
		_ = json.Unmarshal(b, &v)
	}
	for _, c := range v.EventMAC {
		f.Add(c.ExpectedLine)
	}
	good, _ := Encode(testKey, validEvent())
	f.Add(good)
	f.Add(sign(testKey, `{"event_id":"0123456789abcdef0123456789abcdef","event_id":"x"}`))
	f.Add(sign(testKey, `{"generation":1e3}`))
	f.Add(LinePrefix + " x y")
	f.Fuzz(func(t *testing.T, line string) {
		for _, l := range []string{line, resign(line)} {
			ev, js, err := Decode(testKey, l)
			if err != nil {
				if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrMAC) && !errors.Is(err, ErrInvalidEvent) {
					t.Fatalf("untyped error %v", err)
				}
				continue
			}
			if ev.Validate() != nil {
				t.Fatalf("Decode returned an invalid event %+v", ev)
			}
			// What Decode accepts Encode reproduces, and Decode accepts again.
			again, err := Encode(testKey, ev)
			if err != nil {
				t.Fatalf("Encode of a decoded event: %v", err)
			}
			if ev2, _, err := Decode(testKey, again); err != nil || ev2 != ev {
				t.Fatalf("re-decode: %+v %v", ev2, err)
			}
			_ = js
		}
	})
}

// resign treats the fuzzer's input as a JSON payload and signs it, so the
// fuzzer reaches the JSON parser past the MAC.
func resign(s string) string {
	if len(s) > MaxLineLen/2 {
		s = s[:MaxLineLen/2]
	}
	l, err := encodeRaw(testKey, []byte(s))
	if err != nil {
		return ""
	}
	return l
}
