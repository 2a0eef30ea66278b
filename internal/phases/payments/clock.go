package payments

import (
	"net/http"
	"sync/atomic"
	"time"
)

// stripeClock measures how far Stripe's clock runs ahead of this process's
// from the Date header of each of Stripe's answers, so that a lookup by
// Stripe's created times can move its window by the skew it measured
// (stripeonce.Rules.StripeOffset). The header has whole seconds: the
// measure is up to a second (and the answer's travel) behind Stripe's.
type stripeClock struct {
	next   http.RoundTripper
	offset atomic.Int64 // nanoseconds
}

// RoundTrip implements http.RoundTripper.
func (c *stripeClock) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err == nil {
		if date, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
			c.offset.Store(int64(date.Sub(time.Now())))
		}
	}
	return resp, err
}

// Offset is Stripe's clock less ours, as last measured (0 before any answer).
func (c *stripeClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }
