// Package ratelimit limits how fast each user may create idempotency keys.
//
// The limit is per process: N instances behind a load balancer admit up to
// N times the rate in the worst case. That bounds abuse cheaply without a
// write per request; a deployment that needs one global figure puts the
// limit in its gateway.
package ratelimit

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/paymentsd/paymentsd/internal/phases"
)

// ReasonRateLimited is the RefusedError reason of this limiter.
const ReasonRateLimited = "rate_limited"

// Limiter is a token bucket per user: perSecond new keys a second, with a
// burst of the same size.
type Limiter struct {
	perSecond float64
	burst     int

	mu      sync.Mutex
	buckets map[int64]*bucket
	swept   time.Time
}

type bucket struct {
	limiter *rate.Limiter
	used    time.Time
}

// idleAfter is when an unused bucket is forgotten; a full bucket is the same
// as a missing one, so forgetting it changes nothing.
const idleAfter = time.Minute

// New returns a limiter; perSecond <= 0 returns nil, which admits everything.
func New(perSecond int) *Limiter {
	if perSecond <= 0 {
		return nil
	}
	return &Limiter{perSecond: float64(perSecond), burst: perSecond, buckets: map[int64]*bucket{}}
}

// Take takes a token for userID or refuses with the wait until the next.
// It has the phases.Limit signature.
func (l *Limiter) Take(_ context.Context, userID int64) error {
	if l == nil {
		return nil
	}
	now := time.Now()
	l.mu.Lock()
	b, ok := l.buckets[userID]
	if !ok {
		b = &bucket{limiter: rate.NewLimiter(rate.Limit(l.perSecond), l.burst)}
		l.buckets[userID] = b
	}
	b.used = now
	l.sweep(now)
	r := b.limiter.ReserveN(now, 1)
	l.mu.Unlock()

	if delay := r.DelayFrom(now); delay > 0 {
		r.CancelAt(now)
		return &phases.RefusedError{Reason: ReasonRateLimited, RetryAfter: delay}
	}
	return nil
}

// sweep forgets idle buckets, at most once per idleAfter. Called with mu held.
func (l *Limiter) sweep(now time.Time) {
	if now.Sub(l.swept) < idleAfter {
		return
	}
	l.swept = now
	for id, b := range l.buckets {
		if now.Sub(b.used) > idleAfter {
			delete(l.buckets, id)
		}
	}
}
