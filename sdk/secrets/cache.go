package secrets

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// Bounds of a Cache's TTL.
const (
	DefaultTTL = 300 * time.Second
	MinTTL     = time.Second
	MaxTTL     = 86400 * time.Second
)

// Cache reads secrets through a Store and keeps each value
// for a TTL. Concurrent Gets of one reference make one call to the store.
// It is safe for concurrent use and meant to be shared by many sandboxes
// (WithCache). Errors are not cached. Printing it never shows a
// value.
type Cache struct {
	store Store
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	entries map[Ref]*secretEntry
}

// secretEntry is a value read, or being read (done open).
type secretEntry struct {
	done    chan struct{}
	value   []byte
	err     error
	expires time.Time
}

// CacheOption configures NewCache.
type CacheOption interface{ applyCache(*cacheConfig) }

type cacheConfig struct {
	ttl time.Duration
	now func() time.Time
}

type cacheOption func(*cacheConfig)

func (f cacheOption) applyCache(c *cacheConfig) { f(c) }

// WithTTL sets how long a value stays cached: 1 s to 86400 s
// (default 300 s).
func WithTTL(d time.Duration) CacheOption {
	return cacheOption(func(c *cacheConfig) { c.ttl = d })
}

// withClock replaces time.Now, for tests.
func withClock(now func() time.Time) CacheOption {
	return cacheOption(func(c *cacheConfig) { c.now = now })
}

// NewCache makes a cache over store.
func NewCache(store Store, opts ...CacheOption) (*Cache, error) {
	if store == nil {
		return nil, rayito.NewError(rayito.ReasonInvalidArgument, "rayito: a secret cache needs a store")
	}
	c := cacheConfig{ttl: DefaultTTL, now: time.Now}
	for _, o := range opts {
		if o != nil {
			o.applyCache(&c)
		}
	}
	if c.ttl < MinTTL || c.ttl > MaxTTL {
		return nil, rayito.NewError(rayito.ReasonInvalidArgument, "rayito: the secret TTL must be 1s to 86400s")
	}
	return &Cache{store: store, ttl: c.ttl, now: c.now, entries: map[Ref]*secretEntry{}}, nil
}

// Get returns a copy of the value of ref, from the cache while it is
// fresh, else from the store (one call for every concurrent Get of ref).
func (c *Cache) Get(ctx context.Context, ref Ref) ([]byte, error) {
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
func (c *Cache) fetch(ctx context.Context, ref Ref, e *secretEntry) ([]byte, error) {
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
func (c *Cache) Invalidate(ref Ref) {
	c.mu.Lock()
	delete(c.entries, ref)
	c.mu.Unlock()
}

// TTL is how long a value stays cached.
func (c *Cache) TTL() time.Duration { return c.ttl }

// String never shows a value or a name.
func (c *Cache) String() string { return fmt.Sprintf("rayito.Cache{TTL:%s}", c.ttl) }

// GoString is String.
func (c *Cache) GoString() string { return c.String() }

// Format prints String for every verb.
func (c *Cache) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(c.String())) }
