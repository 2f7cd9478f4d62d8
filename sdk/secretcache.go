package rayito

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Bounds of a SecretCache's TTL.
const (
	DefaultSecretTTL = 300 * time.Second
	MinSecretTTL     = time.Second
	MaxSecretTTL     = 86400 * time.Second
)

// SecretCache reads secrets through a SecretStore and keeps each value
// for a TTL. Concurrent Gets of one reference make one call to the store.
// It is safe for concurrent use and meant to be shared by many sandboxes
// (WithSecretCache). Errors are not cached. Printing it never shows a
// value.
type SecretCache struct {
	store SecretStore
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	entries map[SecretRef]*secretEntry
}

// secretEntry is a value read, or being read (done open).
type secretEntry struct {
	done    chan struct{}
	value   []byte
	err     error
	expires time.Time
}

// SecretCacheOption configures NewSecretCache.
type SecretCacheOption interface{ applySecretCache(*secretCacheConfig) }

type secretCacheConfig struct {
	ttl time.Duration
	now func() time.Time
}

type secretCacheOption func(*secretCacheConfig)

func (f secretCacheOption) applySecretCache(c *secretCacheConfig) { f(c) }

// WithSecretTTL sets how long a value stays cached: 1 s to 86400 s
// (default 300 s).
func WithSecretTTL(d time.Duration) SecretCacheOption {
	return secretCacheOption(func(c *secretCacheConfig) { c.ttl = d })
}

// withSecretClock replaces time.Now, for tests.
func withSecretClock(now func() time.Time) SecretCacheOption {
	return secretCacheOption(func(c *secretCacheConfig) { c.now = now })
}

// NewSecretCache makes a cache over store.
func NewSecretCache(store SecretStore, opts ...SecretCacheOption) (*SecretCache, error) {
	if store == nil {
		return nil, newError(ReasonInvalidArgument, "rayito: a secret cache needs a store")
	}
	c := secretCacheConfig{ttl: DefaultSecretTTL, now: time.Now}
	for _, o := range opts {
		if o != nil {
			o.applySecretCache(&c)
		}
	}
	if c.ttl < MinSecretTTL || c.ttl > MaxSecretTTL {
		return nil, newError(ReasonInvalidArgument, "rayito: the secret TTL must be 1s to 86400s")
	}
	return &SecretCache{store: store, ttl: c.ttl, now: c.now, entries: map[SecretRef]*secretEntry{}}, nil
}

// Get returns a copy of the value of ref, from the cache while it is
// fresh, else from the store (one call for every concurrent Get of ref).
func (c *SecretCache) Get(ctx context.Context, ref SecretRef) ([]byte, error) {
	if err := validateSecretRef(ref); err != nil {
		return nil, err
	}
	for {
		c.mu.Lock()
		e := c.entries[ref]
		if e == nil || e.ready() && (e.err != nil || !c.now().Before(e.expires)) {
			e = &secretEntry{done: make(chan struct{})}
			c.entries[ref] = e
			c.mu.Unlock()
			return c.fetch(ctx, ref, e)
		}
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err != nil {
			// The reader's own context ended: read again with ours.
			if isCtxErr(e.err) && ctx.Err() == nil {
				continue
			}
			return nil, e.err
		}
		if c.now().Before(e.expires) {
			return slices.Clone(e.value), nil
		}
	}
}

func (e *secretEntry) ready() bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}

// fetch reads ref into e, which the caller put in the map.
func (c *SecretCache) fetch(ctx context.Context, ref SecretRef, e *secretEntry) ([]byte, error) {
	sec, err := c.store.GetSecret(ctx, ref)
	c.mu.Lock()
	if err != nil {
		e.err = err
		if c.entries[ref] == e {
			delete(c.entries, ref)
		}
	} else {
		e.value = sec.bytes()
		e.expires = c.now().Add(c.ttl)
	}
	close(e.done)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return slices.Clone(e.value), nil
}

// Invalidate forgets ref: the next Get reads the store again.
func (c *SecretCache) Invalidate(ref SecretRef) {
	c.mu.Lock()
	delete(c.entries, ref)
	c.mu.Unlock()
}

// TTL is how long a value stays cached.
func (c *SecretCache) TTL() time.Duration { return c.ttl }

// String never shows a value or a name.
func (c *SecretCache) String() string { return fmt.Sprintf("rayito.SecretCache{TTL:%s}", c.ttl) }

// GoString is String.
func (c *SecretCache) GoString() string { return c.String() }

// Format prints String for every verb.
func (c *SecretCache) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.String())) }
