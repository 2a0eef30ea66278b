package api

import (
	"sync"
	"sync/atomic"
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
	max int64

	// entries maps an API key's hash to its authEntry. A sync.Map, not a
	// map under a read lock: every authenticated request reads it, and a
	// read lock is a write to memory that every core shares.
	entries sync.Map
	size    atomic.Int64 // keys stored since the last clear
}

type authEntry struct {
	userID  int64
	expires time.Time
}

func newAuthCache(ttl time.Duration, max int) *authCache {
	return &authCache{ttl: ttl, max: int64(max)}
}

func (c *authCache) get(hash [32]byte, now time.Time) (int64, bool) {
	if c.ttl <= 0 {
		return 0, false
	}
	v, ok := c.entries.Load(hash)
	if !ok {
		return 0, false
	}
	e := v.(authEntry)
	if now.After(e.expires) {
		return 0, false
	}
	return e.userID, true
}

func (c *authCache) put(hash [32]byte, userID int64, now time.Time) {
	if c.ttl <= 0 {
		return
	}
	if c.size.Load() >= c.max {
		// Crude but bounded (by max and the puts in flight): the set of
		// live API keys is small, so a full cache means churn, and starting
		// over costs one query per key.
		c.entries.Clear()
		c.size.Store(0)
	}
	if _, replaced := c.entries.Swap(hash, authEntry{userID: userID, expires: now.Add(c.ttl)}); !replaced {
		c.size.Add(1)
	}
}
