package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rayito-dev/rayito/proto/events"
)

// Memory is a Store in process memory, safe for concurrent use. With a
// path (NewFile) every write is also saved to that file atomically
// (write to a temporary file, fsync, rename), and the file is read back
// on open: the local platform keeps its events across restarts.
type Memory struct {
	mu   sync.Mutex
	path string
	d    memData
}

type memData struct {
	Sandboxes  map[string]Sandbox             `json:"sandboxes"`
	Events     map[string]map[string]memEvent `json:"events"` // sandbox -> event id
	Deliveries map[string]map[string]Delivery `json:"deliveries"`
	Webhooks   map[string]Webhook             `json:"webhooks"`
	Seq        int64                          `json:"seq"`
}

type memEvent struct {
	Event events.Event `json:"event"`
	Seq   int64        `json:"seq"`
}

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{d: memData{
		Sandboxes:  map[string]Sandbox{},
		Events:     map[string]map[string]memEvent{},
		Deliveries: map[string]map[string]Delivery{},
		Webhooks:   map[string]Webhook{},
	}}
}

// NewFile returns a Memory store saved to path (created 0600 when
// absent; its directory must exist).
func NewFile(path string) (*Memory, error) {
	m := NewMemory()
	m.path = path
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", filepath.Base(path), err)
	}
	if err := json.Unmarshal(data, &m.d); err != nil {
		return nil, fmt.Errorf("store: %s is not a store file: %w", filepath.Base(path), ErrInvalid)
	}
	if m.d.Sandboxes == nil {
		m.d.Sandboxes = map[string]Sandbox{}
	}
	if m.d.Events == nil {
		m.d.Events = map[string]map[string]memEvent{}
	}
	if m.d.Deliveries == nil {
		m.d.Deliveries = map[string]map[string]Delivery{}
	}
	if m.d.Webhooks == nil {
		m.d.Webhooks = map[string]Webhook{}
	}
	return m, nil
}

// save writes the file, if any; called with mu held.
func (m *Memory) save() error {
	if m.path == "" {
		return nil
	}
	data, err := json.Marshal(&m.d)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(m.path), ".store-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, m.path)
}

// GetSandbox implements Store.
func (m *Memory) GetSandbox(_ context.Context, id string) (Sandbox, error) {
	if id == "" {
		return Sandbox{}, fmt.Errorf("empty sandbox id: %w", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.d.Sandboxes[id]; ok {
		return s, nil
	}
	return Sandbox{SandboxID: id}, nil
}

// PutSandbox implements Store.
func (m *Memory) PutSandbox(_ context.Context, prev, next Sandbox) (Sandbox, error) {
	if next.SandboxID == "" || next.SandboxID != prev.SandboxID {
		return Sandbox{}, fmt.Errorf("sandbox id: %w", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.d.Sandboxes[next.SandboxID].Version
	if cur != prev.Version {
		return Sandbox{}, ErrConflict
	}
	next.Version = cur + 1
	m.d.Sandboxes[next.SandboxID] = next
	if err := m.save(); err != nil {
		if cur == 0 {
			delete(m.d.Sandboxes, next.SandboxID)
		} else {
			m.d.Sandboxes[next.SandboxID] = prev
		}
		return Sandbox{}, err
	}
	return next, nil
}

// PutEvent implements Store.
func (m *Memory) PutEvent(_ context.Context, ev events.Event) error {
	if ev.SandboxID == "" || ev.EventID == "" {
		return fmt.Errorf("event ids: %w", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byID := m.d.Events[ev.SandboxID]
	if byID == nil {
		byID = map[string]memEvent{}
		m.d.Events[ev.SandboxID] = byID
	}
	if _, ok := byID[ev.EventID]; ok {
		return ErrDuplicate
	}
	m.d.Seq++
	byID[ev.EventID] = memEvent{Event: ev, Seq: m.d.Seq}
	if err := m.save(); err != nil {
		delete(byID, ev.EventID)
		return err
	}
	return nil
}

// HasEvent implements Store.
func (m *Memory) HasEvent(_ context.Context, sandboxID, eventID string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.d.Events[sandboxID][eventID]
	return ok, nil
}

// ListEvents implements Store: oldest first by generation, then by the
// order they were written.
func (m *Memory) ListEvents(_ context.Context, sandboxID string, limit int) ([]events.Event, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := make([]memEvent, 0, len(m.d.Events[sandboxID]))
	for _, e := range m.d.Events[sandboxID] {
		all = append(all, e)
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].Event.Generation != all[j].Event.Generation {
			return all[i].Event.Generation < all[j].Event.Generation
		}
		return all[i].Seq < all[j].Seq
	})
	out := make([]events.Event, 0, len(all))
	for _, e := range all {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, e.Event)
	}
	return out, nil
}

// OpenSandboxes implements Store; the page token is the last sandbox id
// of the previous page.
func (m *Memory) OpenSandboxes(_ context.Context, pageToken string, limit int) ([]Sandbox, string, error) {
	if limit <= 0 {
		limit = 100
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := make([]string, 0)
	for id, s := range m.d.Sandboxes {
		if s.Open() && id > pageToken {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	next := ""
	if len(ids) > limit {
		ids = ids[:limit]
		next = ids[limit-1]
	}
	out := make([]Sandbox, len(ids))
	for i, id := range ids {
		out[i] = m.d.Sandboxes[id]
	}
	return out, next, nil
}

// Claim implements Store.
func (m *Memory) Claim(_ context.Context, eventID, webhookID string, now, staleBefore time.Time) error {
	if eventID == "" || webhookID == "" {
		return fmt.Errorf("delivery ids: %w", ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byWH := m.d.Deliveries[eventID]
	if byWH == nil {
		byWH = map[string]Delivery{}
		m.d.Deliveries[eventID] = byWH
	}
	old, had := byWH[webhookID]
	if had && (old.Outcome != Claimed || !old.UpdatedAt.Before(staleBefore)) {
		return ErrDuplicate
	}
	byWH[webhookID] = Delivery{EventID: eventID, WebhookID: webhookID, Outcome: Claimed, UpdatedAt: now.UTC()}
	if err := m.save(); err != nil {
		if had {
			byWH[webhookID] = old
		} else {
			delete(byWH, webhookID)
		}
		return err
	}
	return nil
}

// Finish implements Store.
func (m *Memory) Finish(_ context.Context, d Delivery) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.d.Deliveries[d.EventID][d.WebhookID]
	if !ok {
		return ErrNotFound
	}
	d.UpdatedAt = d.UpdatedAt.UTC()
	m.d.Deliveries[d.EventID][d.WebhookID] = d
	if err := m.save(); err != nil {
		m.d.Deliveries[d.EventID][d.WebhookID] = cur
		return err
	}
	return nil
}

// GetDelivery implements Store.
func (m *Memory) GetDelivery(_ context.Context, eventID, webhookID string) (Delivery, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.d.Deliveries[eventID][webhookID]
	if !ok {
		return Delivery{}, ErrNotFound
	}
	return d, nil
}

// PutWebhook implements Store.
func (m *Memory) PutWebhook(_ context.Context, w Webhook) error {
	if err := checkWebhook(w); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, had := m.d.Webhooks[w.WebhookID]
	w.CreatedAt = w.CreatedAt.UTC()
	m.d.Webhooks[w.WebhookID] = w
	if err := m.save(); err != nil {
		if had {
			m.d.Webhooks[w.WebhookID] = old
		} else {
			delete(m.d.Webhooks, w.WebhookID)
		}
		return err
	}
	return nil
}

// ListWebhooks implements Store, sorted by id.
func (m *Memory) ListWebhooks(_ context.Context) ([]Webhook, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Webhook, 0, len(m.d.Webhooks))
	for _, w := range m.d.Webhooks {
		w.Types = slices.Clone(w.Types)
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].WebhookID < out[j].WebhookID })
	return out, nil
}

// DeleteWebhook implements Store.
func (m *Memory) DeleteWebhook(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.d.Webhooks[id]
	if !ok {
		return ErrNotFound
	}
	delete(m.d.Webhooks, id)
	if err := m.save(); err != nil {
		m.d.Webhooks[id] = old
		return err
	}
	return nil
}

func checkWebhook(w Webhook) error {
	if w.WebhookID == "" || len(w.WebhookID) > 128 || w.URL == "" || w.SecretRef == "" {
		return fmt.Errorf("webhook id, url and secret reference are required: %w", ErrInvalid)
	}
	return nil
}

// Expire removes what the table's TTL removes on AWS: events that
// occurred more than TTL before now, their delivery claims, and the
// state of sandboxes killed more than TTL before now (a line replayed
// after that is older than the forwarder's 24 hours and refused anyway).
// It returns how many events it removed.
func (m *Memory) Expire(now time.Time) (int, error) {
	cut := now.Add(-TTL).UnixMilli()
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, err := json.Marshal(&m.d)
	if err != nil {
		return 0, err
	}
	n := 0
	for sb, byID := range m.d.Events {
		for id, e := range byID {
			if e.Event.OccurredAtMs < cut {
				delete(byID, id)
				delete(m.d.Deliveries, id)
				n++
			}
		}
		if len(byID) == 0 {
			delete(m.d.Events, sb)
		}
	}
	dropped := 0
	for id, s := range m.d.Sandboxes {
		if s.Killed && s.LastOccurredAtMs < cut {
			delete(m.d.Sandboxes, id)
			dropped++
		}
	}
	if n == 0 && dropped == 0 {
		return 0, nil
	}
	if err := m.save(); err != nil {
		// Keep memory and file the same.
		var back memData
		if json.Unmarshal(prev, &back) == nil {
			m.d = back
		}
		return 0, err
	}
	return n, nil
}
