package stripefake

import "time"

// searchBucket is the search rate limit (Options.SearchRate): a token
// bucket that holds one second's worth of searches and fills at the rate,
// by the server's clock, so a test that moves the clock on (Advance)
// refills it without sleeping. The caller holds s.mu.
type searchBucket struct {
	rate   int // searches a second; 0: unlimited
	tokens float64
	at     time.Time // when tokens was last filled up to
}

// take spends one search at now, or reports that the rate is exceeded.
func (b *searchBucket) take(now time.Time) bool {
	if b.rate == 0 {
		return true
	}
	switch {
	case b.at.IsZero():
		b.tokens, b.at = float64(b.rate), now
	case now.After(b.at):
		b.tokens = min(float64(b.rate), b.tokens+now.Sub(b.at).Seconds()*float64(b.rate))
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// takeSearch spends one search of the rate limit; false means the search
// is to be refused.
func (s *Server) takeSearch() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.searchRate.take(s.now())
}

// rateLimited is Stripe's answer to a request beyond a rate limit: 429,
// code rate_limit. Stripe sends no Stripe-Should-Retry with it, and its
// libraries (stripe-go included) do not retry it: backing off is the
// caller's decision.
func rateLimited() errorObject {
	return errorObject{
		Type:    typeInvalidRequest,
		Code:    "rate_limit",
		Message: "Too many requests hit the API too quickly. Search allows a limited number of requests per second; back off and try again later.",
		DocURL:  "https://stripe.com/docs/rate-limits",
	}
}
