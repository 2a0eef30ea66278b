package api

import (
	"sync"
	"time"
)

// authCache remembers which user an API key hash belongs to, so an
// authenticated request costs no query. Only successful lookups are cached:
// a new key works at once, and a flood of wrong keys cannot fill the cache.
//
// Staleness: a key deleted from the database keeps working for up to ttl in
// each process that cached it. paymentsd has no key revocation endpoint; a
// fork that adds one shortens ttl or broadcasts invalidations.
type authCache struct {
	ttl time.Duration
	max int

	mu      sync.RWMutex
	entries map[[32]byte]authEntry
}

type authEntry struct {
	userID  int64
	expires time.Time
}

func newAuthCache(ttl time.Duration, max int) *authCache {
	return &authCache{ttl: ttl, max: max, entries: make(map[[32]byte]authEntry)}
}

func (c *authCache) get(hash [32]byte, now time.Time) (int64, bool) {
	if c.ttl <= 0 {
		return 0, false
	}
	c.mu.RLock()
	e, ok := c.entries[hash]
	c.mu.RUnlock()
	if !ok || now.After(e.expires) {
		return 0, false
	}
	return e.userID, true
}

func (c *authCache) put(hash [32]byte, userID int64, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= c.max {
		// Crude but bounded: the set of live API keys is small, so a full
		// cache means churn, and starting over costs one query per key.
		clear(c.entries)
	}
	c.entries[hash] = authEntry{userID: userID, expires: now.Add(c.ttl)}
}
