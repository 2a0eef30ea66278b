package payments

import (
	"context"
	"fmt"
	"strings"

	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/stripeonce"
)

// maxLookupPages bounds one listing: past it the lookup gives up (the
// outcome stays unknown) rather than page through an account for ever.
const maxLookupPages = 100

// errListTooLong means the list's stretch held more PaymentIntents than a
// lookup pages through: the outcome stays unknown until search, which
// covers whatever is older than its lag, covers the whole stretch.
var errListTooLong = fmt.Errorf("more than %d PaymentIntents were created in the stretch search may not cover yet", maxLookupPages*100)

// lookup finds the PaymentIntent of the request's intent, or proves there is
// none. It reads two sources: search by our metadata, which lags writes but
// sees everything older than its lag (a PaymentIntent a failover's lost
// commits left behind, say); and a list by creation time, strongly
// consistent, over what search may not have indexed yet (window). Together
// they miss nothing, whatever the database remembers of its sends. An intent with another amount or currency, or more than
// one PaymentIntent, needs an operator: never a silent choice.
func (c *Charger) lookup(ctx context.Context, req *ChargeRequest, window stripeonce.Span) (*stripe.PaymentIntent, error) {
	found, err := c.find(ctx, req, window)
	if err != nil {
		return nil, err
	}
	var match *stripe.PaymentIntent
	for _, pi := range found {
		switch {
		case pi.Amount != req.Amount || string(pi.Currency) != req.Currency:
			return nil, phases.Conflict("PaymentIntent %s carries this payment's intent with %d %s, not %d %s",
				pi.ID, pi.Amount, pi.Currency, req.Amount, req.Currency)
		case match != nil:
			return nil, phases.Conflict("more than one PaymentIntent carries this payment's intent: %s", idsOf(found))
		}
		match = pi
	}
	return match, nil
}

// find returns every PaymentIntent of the request's intent created within
// window, plus any search finds, by id.
func (c *Charger) find(ctx context.Context, req *ChargeRequest, window stripeonce.Span) (map[string]*stripe.PaymentIntent, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	found := map[string]*stripe.PaymentIntent{}
	if err := c.list(ctx, req, window, found); err != nil {
		return nil, err
	}
	if err := c.search(ctx, req, window, found); err != nil {
		return nil, err
	}
	return found, nil
}

// list adds to found the intent's PaymentIntents created within window.
func (c *Charger) list(ctx context.Context, req *ChargeRequest, window stripeonce.Span, found map[string]*stripe.PaymentIntent) error {
	if window.Empty() {
		return nil // search covers all of it
	}
	params := &stripe.PaymentIntentListParams{
		CreatedRange: &stripe.RangeQueryParams{
			GreaterThanOrEqual: window.Since.Unix(),
			LesserThanOrEqual:  window.Until.Unix() + 1, // Stripe's created is in whole seconds
		},
	}
	params.Limit = stripe.Int64(100)
	params.Context = ctx
	iter := c.api.PaymentIntents.List(params)
	for n := 0; iter.Next(); n++ {
		if n == maxLookupPages*100 {
			return errListTooLong
		}
		if pi := iter.PaymentIntent(); ownedBy(pi, req) {
			found[pi.ID] = pi
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("error listing PaymentIntents: %w", err)
	}
	return nil
}

// search adds to found what Stripe's search index holds for the intent,
// created no earlier than window.SearchSince: anything older belongs to an
// earlier use of the same key, reused once its tombstone expired. The
// search is pooled with other lookups' (see searchPool).
func (c *Charger) search(ctx context.Context, req *ChargeRequest, window stripeonce.Span, found map[string]*stripe.PaymentIntent) error {
	horizon := window.SearchSince.Unix()
	pis, err := c.searches.search(ctx, req.Intent.ID())
	if err != nil {
		return fmt.Errorf("error searching PaymentIntents: %w", err)
	}
	for _, pi := range pis {
		if ownedBy(pi, req) && pi.Created >= horizon {
			found[pi.ID] = pi
		}
	}
	return nil
}

// ownedBy reports whether pi was created for the request's intent in this
// deployment.
func ownedBy(pi *stripe.PaymentIntent, req *ChargeRequest) bool {
	return req.Intent.Owns(pi.Metadata)
}

func idsOf(found map[string]*stripe.PaymentIntent) string {
	out := make([]string, 0, len(found))
	for id := range found {
		out = append(out, id)
	}
	return strings.Join(out, ", ")
}
