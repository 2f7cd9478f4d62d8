// Package logring keeps rayd's most recent log records in memory, for the
// HealthService's Logs RPC (E2B's sandbox logs). It holds what rayd logs
// and nothing more: rayd never logs tokens, headers, envs, payloads, file
// contents, commands or secrets, so neither does the ring.
package logring

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Entry is one record.
type Entry struct {
	Time    time.Time
	Level   slog.Level
	Message string
	// Fields are the record's attributes as text, groups joined with ".".
	Fields map[string]string
}

// Ring holds the last records a Handler saw. It is safe for concurrent
// use.
type Ring struct {
	mu      sync.Mutex
	buf     []Entry
	next    int  // where the next record goes
	full    bool // buf has wrapped
	dropped uint64
}

// New returns a ring of size records (at least 1).
func New(size int) *Ring {
	return &Ring{buf: make([]Entry, max(size, 1))}
}

func (r *Ring) add(e Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full {
		r.dropped++
	}
	r.buf[r.next] = e
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// Since returns, oldest first, at most limit records at or after since
// (the zero time: all), and how many records the ring has let go since
// it was made.
func (r *Ring) Since(since time.Time, limit int) ([]Entry, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []Entry
	if r.full {
		all = append(append(all, r.buf[r.next:]...), r.buf[:r.next]...)
	} else {
		all = append(all, r.buf[:r.next]...)
	}
	out := make([]Entry, 0, min(limit, len(all)))
	for _, e := range all {
		if len(out) == limit {
			break
		}
		if !e.Time.Before(since) {
			out = append(out, e)
		}
	}
	return out, r.dropped
}

// Handler passes every record to the next handler and keeps a copy in
// its ring.
type Handler struct {
	next   slog.Handler
	ring   *Ring
	attrs  []slog.Attr // from WithAttrs, with their group prefix
	prefix string      // from WithGroup
}

// Wrap returns a Handler that keeps next's records in r.
func Wrap(next slog.Handler, r *Ring) *Handler {
	return &Handler{next: next, ring: r}
}

// From returns the ring of h when h is a Handler.
func From(h slog.Handler) *Ring {
	if lh, ok := h.(*Handler); ok {
		return lh.ring
	}
	return nil
}

// Enabled is the next handler's.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle keeps the record and passes it on.
func (h *Handler) Handle(ctx context.Context, rec slog.Record) error {
	fields := map[string]string{}
	for _, a := range h.attrs {
		flatten(fields, "", a)
	}
	rec.Attrs(func(a slog.Attr) bool {
		flatten(fields, h.prefix, a)
		return true
	})
	h.ring.add(Entry{Time: rec.Time, Level: rec.Level, Message: rec.Message, Fields: fields})
	return h.next.Handle(ctx, rec)
}

// WithAttrs keeps the attributes for the ring and for the next handler.
func (h *Handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	c.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range as {
		if h.prefix != "" {
			a.Key = h.prefix + a.Key
		}
		c.attrs = append(c.attrs, a)
	}
	return &c
}

// WithGroup prefixes later attributes with name.
func (h *Handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.next = h.next.WithGroup(name)
	c.prefix = h.prefix + name + "."
	return &c
}

// flatten writes a into m under prefix, groups joined with ".".
func flatten(m map[string]string, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			flatten(m, p, g)
		}
		return
	}
	if a.Key == "" {
		return
	}
	m[prefix+a.Key] = v.String()
}
