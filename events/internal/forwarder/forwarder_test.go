package forwarder

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/rayito-dev/rayito/events/internal/store"
	"github.com/rayito-dev/rayito/proto/events"
)

var stackKey = bytes.Repeat([]byte{7}, 32)

type staticKey []byte

func (k staticKey) StackKey(context.Context) ([]byte, error) { return k, nil }

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

var t0 = time.Date(2026, 12, 4, 8, 0, 0, 0, time.UTC)

func newForwarder(t *testing.T) (*Forwarder, *store.Memory, *clock, *bytes.Buffer) {
	t.Helper()
	c := &clock{t: t0}
	m := store.NewMemory()
	var logs bytes.Buffer
	return &Forwarder{Keys: staticKey(stackKey), Store: m, Now: c.now, Log: slog.New(slog.NewJSONHandler(&logs, nil))}, m, c, &logs
}

var idSeq int

func ev(sandbox string, typ events.Type, gen uint64, at time.Time) events.Event {
	idSeq++
	e := events.Event{EventID: fmt.Sprintf("%032x", idSeq), SandboxID: sandbox, Type: typ, Generation: gen, OccurredAtMs: at.UnixMilli(), ImageARN: "arn:aws:lambda:us-east-1:123456789012:microvm-image/rayito-base"}
	if typ == events.Killed {
		e.KillReason = events.KillRequest
	}
	return e
}

func line(t *testing.T, sandbox string, e events.Event) string {
	t.Helper()
	l, err := events.Encode(events.SandboxKey(stackKey, sandbox), e)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func batch(stream string, lines ...string) lambdaevents.CloudwatchLogsData {
	d := lambdaevents.CloudwatchLogsData{MessageType: "DATA_MESSAGE", LogGroup: "/rayito/rayito-base", LogStream: stream}
	for i, l := range lines {
		d.LogEvents = append(d.LogEvents, lambdaevents.CloudwatchLogsLogEvent{ID: fmt.Sprint(i), Timestamp: t0.UnixMilli(), Message: l})
	}
	return d
}

func encodeBatch(t *testing.T, d lambdaevents.CloudwatchLogsData) lambdaevents.CloudwatchLogsEvent {
	t.Helper()
	js, _ := json.Marshal(d)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(js)
	zw.Close()
	return lambdaevents.CloudwatchLogsEvent{AWSLogs: lambdaevents.CloudwatchLogsRawData{Data: base64.StdEncoding.EncodeToString(buf.Bytes())}}
}

func TestSandboxFromStream(t *testing.T) {
	for stream, want := range map[string]string{
		"sbx-1":                         "sbx-1",
		"2026/12/04/rayito/sbx-1":       "sbx-1",
		"prefix/a.b_c-D9":               "a.b_c-D9",
		"":                              "",
		"x/":                            "",
		"x/..":                          "",
		"x/a b":                         "",
		"x/" + strings.Repeat("a", 129): "",
	} {
		got, ok := SandboxFromStream(stream)
		if got != want || ok != (want != "") {
			t.Errorf("SandboxFromStream(%q) = %q, %v; want %q", stream, got, ok, want)
		}
	}
}

// TestTable feeds one line at a time after a fixed history and checks the
// reason it gets.
func TestTable(t *testing.T) {
	const sb = "sbx-1"
	key := events.SandboxKey(stackKey, sb)
	otherKey := events.SandboxKey(stackKey, "sbx-2")
	signed := func(k []byte, e events.Event) string {
		l, err := events.Encode(k, e)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	created := ev(sb, events.Created, 1, t0)
	tamper := func(l string) string {
		// flip a character of the payload: the MAC no longer matches.
		f := strings.Split(l, " ")
		b := []byte(f[1])
		if b[5] == 'A' {
			b[5] = 'B'
		} else {
			b[5] = 'A'
		}
		f[1] = string(b)
		return strings.Join(f, " ")
	}
	// A syntactically perfect line signed with the right key over JSON
	// that is not an event.
	rawSigned := func(js string) string {
		m := hmacSHA256(key, []byte(js))
		return events.LinePrefix + " " + base64.RawURLEncoding.EncodeToString([]byte(js)) + " " + base64.RawURLEncoding.EncodeToString(m)
	}
	cases := []struct {
		name    string
		history []events.Event
		line    string
		want    string
	}{
		{"created admitted", nil, signed(key, created), ""},
		{"mac_invalid: another sandbox's key", nil, signed(otherKey, created), ReasonMACInvalid},
		{"mac_invalid: tampered payload", nil, tamper(signed(key, created)), ReasonMACInvalid},
		{"sandbox_mismatch", nil, signed(key, ev("sbx-2", events.Created, 1, t0)), ReasonSandboxMismatch},
		{"malformed: two fields", nil, events.LinePrefix + " abc", ReasonMalformedLine},
		{"malformed: padded base64", nil, strings.Replace(signed(key, created), " ", "= ", 1), ReasonMalformedLine},
		{"malformed: four fields", nil, signed(key, created) + " x", ReasonMalformedLine},
		{"malformed: short MAC", nil, events.LinePrefix + " e30 AAAA", ReasonMalformedLine},
		{"malformed: signed non-event JSON", nil, rawSigned(`{"event_id":1}`), ReasonMalformedLine},
		{"malformed: signed array", nil, rawSigned(`[]`), ReasonMalformedLine},
		{"malformed: too long", nil, events.LinePrefix + " " + strings.Repeat("A", 5000) + " AAAA", ReasonMalformedLine},
		{"stale", nil, signed(key, ev(sb, events.Created, 1, t0.Add(-MaxAge-time.Second))), ReasonStaleEvent},
		{"24 h old admitted", nil, signed(key, ev(sb, events.Created, 1, t0.Add(-MaxAge+time.Second))), ""},
		{"future", nil, signed(key, ev(sb, events.Created, 1, t0.Add(MaxAhead+time.Second))), ReasonFutureEvent},
		{"4 min ahead admitted", nil, signed(key, ev(sb, events.Created, 1, t0.Add(4*time.Minute))), ""},
		{"duplicate", []events.Event{created}, signed(key, created), ReasonDuplicate},
		{"second created", []events.Event{created}, signed(key, ev(sb, events.Created, 2, t0)), ReasonInvalidTransition},
		{"paused before created", nil, signed(key, ev(sb, events.Paused, 2, t0)), ReasonInvalidTransition},
		{"paused after created", []events.Event{created}, signed(key, ev(sb, events.Paused, 2, t0)), ""},
		{"generation not increasing", []events.Event{created, ev(sb, events.Paused, 3, t0)}, signed(key, ev(sb, events.Resumed, 3, t0)), ReasonInvalidTransition},
		{"resumed after created", []events.Event{created}, signed(key, ev(sb, events.Resumed, 2, t0)), ReasonInvalidTransition},
		{"paused twice", []events.Event{created, ev(sb, events.Paused, 2, t0)}, signed(key, ev(sb, events.Paused, 3, t0)), ReasonInvalidTransition},
		{"killed while paused", []events.Event{created, ev(sb, events.Paused, 2, t0)}, signed(key, ev(sb, events.Killed, 3, t0)), ""},
		{"after killed", []events.Event{created, ev(sb, events.Killed, 2, t0)}, signed(key, ev(sb, events.Paused, 3, t0)), ReasonInvalidTransition},
		{"killed twice", []events.Event{created, ev(sb, events.Killed, 2, t0)}, signed(key, ev(sb, events.Killed, 3, t0)), ReasonInvalidTransition},
		{"not an event line", nil, "hello from rayd", "ignored"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _, _, _ := newForwarder(t)
			ctx := context.Background()
			var hist []string
			for _, h := range tc.history {
				hist = append(hist, signed(key, h))
			}
			if s, err := f.Process(ctx, batch("rayito/"+sb, hist...)); err != nil || s.Admitted != len(hist) {
				t.Fatalf("history: %+v %v", s, err)
			}
			s, err := f.Process(ctx, batch("rayito/"+sb, tc.line))
			if err != nil {
				t.Fatal(err)
			}
			switch tc.want {
			case "":
				if s.Admitted != 1 {
					t.Fatalf("want admitted, got %+v", s)
				}
			case "ignored":
				if s.Ignored != 1 || s.Admitted != 0 || len(s.Rejected) != 0 {
					t.Fatalf("want ignored, got %+v", s)
				}
			default:
				if s.Rejected[tc.want] != 1 || s.Admitted != 0 {
					t.Fatalf("want %s, got %+v", tc.want, s)
				}
			}
		})
	}
}

// TestThrottle: 20 paused/resumed in a row, then one per 30 s; created
// and killed are never throttled.
func TestThrottle(t *testing.T) {
	const sb = "sbx-t"
	f, m, c, _ := newForwarder(t)
	ctx := context.Background()
	gen := uint64(1)
	send := func(typ events.Type) Summary {
		t.Helper()
		s, err := f.Process(ctx, batch(sb, line(t, sb, ev(sb, typ, gen, c.now()))))
		if err != nil {
			t.Fatal(err)
		}
		if s.Admitted == 1 {
			gen++
		}
		return s
	}
	if s := send(events.Created); s.Admitted != 1 {
		t.Fatalf("created: %+v", s)
	}
	typ := func() events.Type {
		if gen%2 == 0 {
			return events.Paused
		}
		return events.Resumed
	}
	for i := 0; i < Burst; i++ {
		if s := send(typ()); s.Admitted != 1 {
			t.Fatalf("event %d of the burst: %+v", i+1, s)
		}
	}
	if s := send(typ()); s.Rejected[ReasonRateLimited] != 1 {
		t.Fatalf("21st: %+v", s)
	}
	c.advance(29 * time.Second)
	if s := send(typ()); s.Rejected[ReasonRateLimited] != 1 {
		t.Fatalf("after 29 s: %+v", s)
	}
	c.advance(time.Second)
	if s := send(typ()); s.Admitted != 1 {
		t.Fatalf("after 30 s: %+v", s)
	}
	if s := send(typ()); s.Rejected[ReasonRateLimited] != 1 {
		t.Fatalf("right after: %+v", s)
	}
	// killed is never throttled.
	if s := send(events.Killed); s.Admitted != 1 {
		t.Fatalf("killed: %+v", s)
	}
	st, _ := m.GetSandbox(ctx, sb)
	if !st.Killed || st.Open() {
		t.Fatalf("state %+v", st)
	}
	// The bucket refills to 20 at most: after an hour, still 20.
	if got := refill(0, t0.UnixMilli(), t0.Add(time.Hour)); got != Burst {
		t.Fatalf("refill capped at %v", got)
	}
}

// TestPoisonedBatch: bad lines in the middle of a batch do not stop the
// good ones around them, and the summary has counts only.
func TestPoisonedBatch(t *testing.T) {
	const sb = "sbx-p"
	f, m, _, logs := newForwarder(t)
	ctx := context.Background()
	good := []events.Event{ev(sb, events.Created, 1, t0), ev(sb, events.Paused, 2, t0), ev(sb, events.Resumed, 3, t0), ev(sb, events.Killed, 4, t0)}
	forged, _ := events.Encode(events.SandboxKey(stackKey, "other"), ev(sb, events.Paused, 9, t0))
	lines := []string{
		line(t, sb, good[0]),
		line(t, sb, good[1]),
		forged,
		events.LinePrefix + " \x00\xff garbage",
		events.LinePrefix + " " + strings.Repeat("A", 100000),
		"plain output",
		line(t, sb, good[2]),
		line(t, sb, good[3]),
	}
	sum, err := f.Handle(ctx, encodeBatch(t, batch("rayito/"+sb, lines...)))
	if err != nil {
		t.Fatal(err)
	}
	if sum.Admitted != 4 || sum.Rejected[ReasonMACInvalid] != 1 || sum.Rejected[ReasonMalformedLine] != 2 || sum.Ignored != 1 || sum.Lines != 8 {
		t.Fatalf("summary %+v", sum)
	}
	got, _ := m.ListEvents(ctx, sb, 0)
	if len(got) != 4 {
		t.Fatalf("stored %d events", len(got))
	}
	for i, e := range got {
		if e != good[i] {
			t.Fatalf("event %d = %+v, want %+v", i, e, good[i])
		}
	}
	// One log line, counts only: no line, id, key or MAC.
	out := logs.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, `"mac_invalid":1`) {
		t.Fatalf("log: %s", out)
	}
	for _, secret := range append([]string{sb, good[0].EventID, "garbage", base64.RawURLEncoding.EncodeToString(stackKey)}, lines[0], strings.Fields(lines[0])[2]) {
		if strings.Contains(out, secret) {
			t.Fatalf("log leaks %q: %s", secret, out)
		}
	}
	// Replaying the batch: every good line is a duplicate.
	sum, err = f.Handle(ctx, encodeBatch(t, batch("rayito/"+sb, lines...)))
	if err != nil || sum.Rejected[ReasonDuplicate] != 4 || sum.Admitted != 0 {
		t.Fatalf("replay %+v %v", sum, err)
	}
}

func TestBadBatchAndStream(t *testing.T) {
	f, _, _, _ := newForwarder(t)
	ctx := context.Background()
	for name, data := range map[string]string{"not base64": "%%%", "not gzip": base64.StdEncoding.EncodeToString([]byte("plain")), "not json": gz("[1,"), "bomb": gz(strings.Repeat(" ", MaxBatchBytes+1))} {
		if _, err := f.Handle(ctx, lambdaevents.CloudwatchLogsEvent{AWSLogs: lambdaevents.CloudwatchLogsRawData{Data: data}}); !errors.Is(err, ErrBatch) {
			t.Errorf("%s: %v", name, err)
		}
	}
	s, err := f.Process(ctx, batch("bad stream!", line(t, "x", ev("x", events.Created, 1, t0))))
	if err != nil || s.Rejected[ReasonBadStream] != 1 {
		t.Fatalf("%+v %v", s, err)
	}
	s, err = f.Process(ctx, lambdaevents.CloudwatchLogsData{MessageType: "CONTROL_MESSAGE", LogEvents: []lambdaevents.CloudwatchLogsLogEvent{{Message: "CWL CONTROL MESSAGE"}}})
	if err != nil || s.Lines != 0 {
		t.Fatalf("control %+v %v", s, err)
	}
}

func gz(s string) string {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(s))
	zw.Close()
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// failingStore fails PutEvent for one event id.
type failingStore struct {
	store.Store
	failID string
}

func (s failingStore) PutEvent(ctx context.Context, e events.Event) error {
	if e.EventID == s.failID {
		return errors.New("backend down")
	}
	return s.Store.PutEvent(ctx, e)
}

// TestStoreErrorRetries: a store error on one line lets the rest through,
// fails the invocation for a retry, and the retry repairs the missing
// event item without admitting anything twice.
func TestStoreErrorRetries(t *testing.T) {
	const sb = "sbx-r"
	f, m, _, _ := newForwarder(t)
	ctx := context.Background()
	evs := []events.Event{ev(sb, events.Created, 1, t0), ev(sb, events.Paused, 2, t0), ev(sb, events.Resumed, 3, t0)}
	lines := []string{line(t, sb, evs[0]), line(t, sb, evs[1]), line(t, sb, evs[2])}
	f.Store = failingStore{Store: m, failID: evs[2].EventID}
	s, err := f.Process(ctx, batch(sb, lines...))
	if !errors.Is(err, ErrRetry) || s.Admitted != 2 || s.Rejected[ReasonStoreError] != 1 {
		t.Fatalf("%+v %v", s, err)
	}
	f.Store = m
	s, err = f.Process(ctx, batch(sb, lines...))
	if err != nil || s.Rejected[ReasonDuplicate] != 2 || s.Admitted != 1 {
		t.Fatalf("retry %+v %v", s, err)
	}
	got, _ := m.ListEvents(ctx, sb, 0)
	if len(got) != 3 {
		t.Fatalf("%d events", len(got))
	}
}

func TestCachedKey(t *testing.T) {
	c := &clock{t: t0}
	n := 0
	src := keyFunc(func(context.Context) ([]byte, error) { n++; return stackKey, nil })
	k := &CachedKey{Source: src, TTL: time.Minute, Now: c.now}
	k.StackKey(context.Background())
	k.StackKey(context.Background())
	c.advance(time.Minute)
	k.StackKey(context.Background())
	if n != 2 {
		t.Fatalf("%d reads", n)
	}
}

type keyFunc func(context.Context) ([]byte, error)

func (f keyFunc) StackKey(ctx context.Context) ([]byte, error) { return f(ctx) }

func hmacSHA256(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}
