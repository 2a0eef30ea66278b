package payments

import (
	"context"
	"fmt"
	"strings"

	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// maxLookupPages bounds one listing: past it the lookup gives up (the
// outcome stays unknown) rather than page through an account for ever.
const maxLookupPages = 100

// lookup finds the PaymentIntent of the request's intent, or proves there is
// none. It reads two sources: a list by creation time, strongly consistent,
// from a little before the key was created; and search by our metadata,
// which lags writes but sees everything older than its lag. Together they
// miss nothing. An intent with another amount or currency, or more than
// one PaymentIntent, needs an operator: never a silent choice.
func (c *Charger) lookup(ctx context.Context, req *ChargeRequest) (*stripe.PaymentIntent, error) {
	found, err := c.find(ctx, req)
	if err != nil {
		return nil, err
	}
	var match *stripe.PaymentIntent
	for _, pi := range found {
		switch {
		case pi.Amount != req.Amount || string(pi.Currency) != req.Currency:
			return nil, phases.NeedsAttention("PaymentIntent %s carries this payment's intent with %d %s, not %d %s",
				pi.ID, pi.Amount, pi.Currency, req.Amount, req.Currency)
		case match != nil:
			return nil, phases.NeedsAttention("more than one PaymentIntent carries this payment's intent: %s", ids(found))
		}
		match = pi
	}
	return match, nil
}

// find returns every PaymentIntent of the request's intent, by id.
func (c *Charger) find(ctx context.Context, req *ChargeRequest) (map[string]*stripe.PaymentIntent, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	found := map[string]*stripe.PaymentIntent{}
	if err := c.list(ctx, req, found); err != nil {
		return nil, err
	}
	if err := c.search(ctx, req, found); err != nil {
		return nil, err
	}
	return found, nil
}

// list adds to found the intent's PaymentIntents created since a little
// before its key.
func (c *Charger) list(ctx context.Context, req *ChargeRequest, found map[string]*stripe.PaymentIntent) error {
	params := &stripe.PaymentIntentListParams{
		CreatedRange: &stripe.RangeQueryParams{
			GreaterThanOrEqual: req.KeyCreatedAt.Add(-c.cfg.LookupLookback).Unix(),
		},
	}
	params.Limit = stripe.Int64(100)
	params.Context = ctx
	iter := c.api.PaymentIntents.List(params)
	for n := 0; iter.Next(); n++ {
		if n == maxLookupPages*100 {
			return fmt.Errorf("listing PaymentIntents since the key was created passed %d pages", maxLookupPages)
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

// search adds to found what Stripe's search index holds for the intent.
func (c *Charger) search(ctx context.Context, req *ChargeRequest, found map[string]*stripe.PaymentIntent) error {
	params := &stripe.PaymentIntentSearchParams{}
	params.Query = fmt.Sprintf("metadata['%s']:'%s'", intent.MetadataIntent, req.Intent.ID())
	params.Context = ctx
	iter := c.api.PaymentIntents.Search(params)
	for iter.Next() {
		if pi := iter.PaymentIntent(); ownedBy(pi, req) {
			found[pi.ID] = pi
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("error searching PaymentIntents: %w", err)
	}
	return nil
}

// ownedBy reports whether pi was created for the request's intent in this
// deployment.
func ownedBy(pi *stripe.PaymentIntent, req *ChargeRequest) bool {
	return req.Intent.Owns(pi.Metadata)
}

func ids(found map[string]*stripe.PaymentIntent) string {
	out := make([]string, 0, len(found))
	for id := range found {
		out = append(out, id)
	}
	return strings.Join(out, ", ")
}
