// Package forwarder admits signed lifecycle event lines from a CloudWatch
// Logs subscription batch into the events store.
//
// Each log stream of the image's log group belongs to one sandbox: its
// name is the sandbox id, or ends in "/" followed by the sandbox id (the
// last "/"-separated segment, 1 to 128 characters of [A-Za-z0-9._:-]). The
// stream name does not prove anything: it only says whose key to check
// the MAC with. For every line the forwarder
//
//  1. derives the sandbox's key from the stack key (SandboxKey) and
//     decodes the line, the MAC checked in constant time before any
//     parsing (mac_invalid, malformed_line);
//  2. requires the event's sandbox_id to be the stream's
//     (sandbox_mismatch), occurred_at_ms at most 24 h old (stale_event)
//     and at most 5 min ahead (future_event);
//  3. refuses an event id already stored (duplicate);
//  4. admits by lifecycle order: exactly one created, then paused after
//     created or resumed, resumed after paused, killed once, nothing after
//     killed, generations strictly increasing (invalid_transition);
//  5. throttles paused and resumed per sandbox with a token bucket (20,
//     then one every 30 s; rate_limited); created and killed never are;
//  6. writes the sandbox state (conditional on the version it read) and
//     the event item (conditional on its id).
//
// A line that fails is counted under its reason and the batch goes on.
// One summary per invocation carries only counts: never a line, an id, a
// key or a MAC.
package forwarder

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/rayito-dev/rayito/events/internal/store"
	"github.com/rayito-dev/rayito/proto/events"
)

// Limits of admission.
const (
	MaxAge      = 24 * time.Hour
	MaxAhead    = 5 * time.Minute
	Burst       = 20
	RefillEvery = 30 * time.Second
	// MaxBatchBytes bounds a decompressed subscription batch (CloudWatch
	// sends at most about 1 MB).
	MaxBatchBytes = 8 << 20
	maxIDLen      = 128
	conflictTries = 4
)

// Reasons a line is not admitted, the keys of Summary.Rejected.
const (
	ReasonMACInvalid        = "mac_invalid"
	ReasonSandboxMismatch   = "sandbox_mismatch"
	ReasonMalformedLine     = "malformed_line"
	ReasonStaleEvent        = "stale_event"
	ReasonFutureEvent       = "future_event"
	ReasonDuplicate         = "duplicate"
	ReasonInvalidTransition = "invalid_transition"
	ReasonRateLimited       = "rate_limited"
	ReasonBadStream         = "bad_stream"
	ReasonStoreError        = "store_error"
)

// ErrBatch is returned for a batch that cannot be read at all (not base64,
// not gzip, not JSON, too large): nothing in it can be admitted.
var ErrBatch = errors.New("forwarder: unreadable subscription batch")

// ErrRetry is returned after a batch in which some line could not be
// written for a store or key error: the invocation is retried, and the
// lines already admitted then count as duplicates.
var ErrRetry = errors.New("forwarder: some lines hit a store error; retry the batch")

// KeySource yields the stack key.
type KeySource interface {
	StackKey(ctx context.Context) ([]byte, error)
}

// Forwarder is the forwarder's logic; Handle is the Lambda handler.
type Forwarder struct {
	Keys  KeySource
	Store store.Store
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Log receives the one summary line per invocation (slog.Default
	// when nil).
	Log *slog.Logger
}

// Summary counts what one invocation did.
type Summary struct {
	Lines    int            `json:"lines"`
	Ignored  int            `json:"ignored"`
	Admitted int            `json:"admitted"`
	Rejected map[string]int `json:"rejected"`
}

func (f *Forwarder) now() time.Time {
	if f.Now != nil {
		return f.Now()
	}
	return time.Now()
}

// Handle is the Lambda handler for a CloudWatch Logs subscription.
func (f *Forwarder) Handle(ctx context.Context, ev lambdaevents.CloudwatchLogsEvent) (Summary, error) {
	data, err := DecodeBatch(ev.AWSLogs.Data)
	if err != nil {
		f.log(ctx, Summary{Rejected: map[string]int{"unreadable_batch": 1}})
		return Summary{}, err
	}
	sum, err := f.Process(ctx, data)
	f.log(ctx, sum)
	return sum, err
}

func (f *Forwarder) log(ctx context.Context, s Summary) {
	l := f.Log
	if l == nil {
		l = slog.Default()
	}
	attrs := []any{slog.Int("lines", s.Lines), slog.Int("ignored", s.Ignored), slog.Int("admitted", s.Admitted)}
	if len(s.Rejected) > 0 {
		group := make([]any, 0, len(s.Rejected))
		for k, v := range s.Rejected {
			group = append(group, slog.Int(k, v))
		}
		attrs = append(attrs, slog.Group("rejected", group...))
	}
	l.InfoContext(ctx, "forwarder summary", attrs...)
}

// DecodeBatch reads a subscription batch's data: base64, gzip, JSON,
// bounded to MaxBatchBytes once decompressed.
func DecodeBatch(b64 string) (lambdaevents.CloudwatchLogsData, error) {
	var d lambdaevents.CloudwatchLogsData
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return d, fmt.Errorf("%w: not base64", ErrBatch)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return d, fmt.Errorf("%w: not gzip", ErrBatch)
	}
	plain, err := io.ReadAll(io.LimitReader(zr, MaxBatchBytes+1))
	if err != nil {
		return d, fmt.Errorf("%w: bad gzip stream", ErrBatch)
	}
	if len(plain) > MaxBatchBytes {
		return d, fmt.Errorf("%w: larger than %d bytes", ErrBatch, MaxBatchBytes)
	}
	if err := json.Unmarshal(plain, &d); err != nil {
		return d, fmt.Errorf("%w: not JSON", ErrBatch)
	}
	return d, nil
}

// SandboxFromStream returns the sandbox id a log stream belongs to: the
// stream's last "/"-separated segment, 1 to 128 characters of
// [A-Za-z0-9._:-] (and not "." or "..").
func SandboxFromStream(stream string) (string, bool) {
	id := stream[strings.LastIndexByte(stream, '/')+1:]
	if id == "" || len(id) > maxIDLen || id == "." || id == ".." {
		return "", false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return "", false
		}
	}
	return id, true
}

// Process admits the lines of one decoded batch.
func (f *Forwarder) Process(ctx context.Context, d lambdaevents.CloudwatchLogsData) (Summary, error) {
	sum := Summary{Rejected: map[string]int{}}
	if d.MessageType == "CONTROL_MESSAGE" {
		return sum, nil
	}
	var lines []string
	for _, le := range d.LogEvents {
		sum.Lines++
		if !strings.HasPrefix(le.Message, events.LinePrefix) {
			sum.Ignored++
			continue
		}
		lines = append(lines, strings.TrimRight(le.Message, "\r\n"))
	}
	if len(lines) == 0 {
		return sum, nil
	}
	id, ok := SandboxFromStream(d.LogStream)
	if !ok {
		sum.Rejected[ReasonBadStream] += len(lines)
		return sum, nil
	}
	stackKey, err := f.Keys.StackKey(ctx)
	if err != nil {
		sum.Rejected[ReasonStoreError] += len(lines)
		return sum, fmt.Errorf("%w: stack key unavailable", ErrRetry)
	}
	key := events.SandboxKey(stackKey, id)
	retry := false
	for _, line := range lines {
		reason, err := f.admit(ctx, key, id, line)
		switch {
		case err != nil:
			sum.Rejected[ReasonStoreError]++
			retry = true
		case reason == "":
			sum.Admitted++
		default:
			sum.Rejected[reason]++
		}
	}
	if retry {
		return sum, ErrRetry
	}
	return sum, nil
}

// admit returns "" when the line was admitted, a reason when it was
// refused, or an error when the store failed.
func (f *Forwarder) admit(ctx context.Context, key []byte, sandboxID, line string) (string, error) {
	ev, _, err := events.Decode(key, line)
	switch {
	case errors.Is(err, events.ErrMAC):
		return ReasonMACInvalid, nil
	case err != nil:
		return ReasonMalformedLine, nil
	}
	if ev.SandboxID != sandboxID {
		return ReasonSandboxMismatch, nil
	}
	now := f.now()
	at := time.UnixMilli(ev.OccurredAtMs)
	if now.Sub(at) > MaxAge {
		return ReasonStaleEvent, nil
	}
	if at.Sub(now) > MaxAhead {
		return ReasonFutureEvent, nil
	}
	for try := 0; try < conflictTries; try++ {
		reason, err := f.tryAdmit(ctx, ev, now)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return reason, err
	}
	return "", fmt.Errorf("forwarder: sandbox state kept changing: %w", store.ErrConflict)
}

func (f *Forwarder) tryAdmit(ctx context.Context, ev events.Event, now time.Time) (string, error) {
	s, err := f.Store.GetSandbox(ctx, ev.SandboxID)
	if err != nil {
		return "", err
	}
	if s.LastEventID == ev.EventID {
		// Admitted before; the event item may be missing if the previous
		// attempt stopped between the two writes.
		if err := f.Store.PutEvent(ctx, ev); errors.Is(err, store.ErrDuplicate) {
			return ReasonDuplicate, nil
		} else if err != nil {
			return "", err
		}
		return "", nil
	}
	if has, err := f.Store.HasEvent(ctx, ev.SandboxID, ev.EventID); err != nil {
		return "", err
	} else if has {
		return ReasonDuplicate, nil
	}
	next, reason := Next(s, ev, now)
	if reason != "" {
		return reason, nil
	}
	if _, err := f.Store.PutSandbox(ctx, s, next); err != nil {
		return "", err
	}
	if err := f.Store.PutEvent(ctx, ev); err != nil && !errors.Is(err, store.ErrDuplicate) {
		return "", err
	}
	return "", nil
}

// Next is the admission rule: the sandbox state after ev, or the reason
// ev is refused. now drives the paused/resumed token bucket.
func Next(s store.Sandbox, ev events.Event, now time.Time) (store.Sandbox, string) {
	next := s
	switch ev.Type {
	case events.Created:
		if s.Created || s.Killed {
			return s, ReasonInvalidTransition
		}
		next.Created = true
		next.Tokens = Burst
		next.BucketAtMs = now.UnixMilli()
	case events.Paused, events.Resumed, events.Killed:
		if !s.Created || s.Killed || ev.Generation <= s.LastGeneration {
			return s, ReasonInvalidTransition
		}
		switch ev.Type {
		case events.Paused:
			if s.LastType == events.Paused {
				return s, ReasonInvalidTransition
			}
		case events.Resumed:
			if s.LastType != events.Paused {
				return s, ReasonInvalidTransition
			}
		case events.Killed:
			next.Killed = true
		}
		if ev.Type != events.Killed {
			tokens := refill(s.Tokens, s.BucketAtMs, now)
			if tokens < 1 {
				return s, ReasonRateLimited
			}
			next.Tokens = tokens - 1
			next.BucketAtMs = now.UnixMilli()
		}
	default:
		return s, ReasonMalformedLine
	}
	next.LastEventID = ev.EventID
	next.LastType = ev.Type
	next.LastGeneration = ev.Generation
	next.LastOccurredAtMs = ev.OccurredAtMs
	if ev.ImageARN != "" {
		next.ImageARN = ev.ImageARN
	}
	if ev.ExecutionID != "" {
		next.ExecutionID = ev.ExecutionID
	}
	return next, ""
}

func refill(tokens float64, atMs int64, now time.Time) float64 {
	elapsed := now.Sub(time.UnixMilli(atMs))
	if elapsed > 0 {
		tokens += float64(elapsed) / float64(RefillEvery)
	}
	if tokens > Burst {
		tokens = Burst
	}
	return tokens
}

// CachedKey is a KeySource that caches another for TTL.
type CachedKey struct {
	Source KeySource
	TTL    time.Duration
	Now    func() time.Time

	mu  sync.Mutex
	key []byte
	at  time.Time
}

// StackKey implements KeySource.
func (c *CachedKey) StackKey(ctx context.Context) ([]byte, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.key != nil && now().Sub(c.at) < c.TTL {
		return c.key, nil
	}
	k, err := c.Source.StackKey(ctx)
	if err != nil {
		return nil, err
	}
	c.key, c.at = k, now()
	return k, nil
}
