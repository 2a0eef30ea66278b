package payments

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// maxAttempts bounds the Stripe idempotency keys one payment may use. Each
// new one is taken only after the previous one was proven to hold a cached
// server error under which nothing was created.
const maxAttempts = 5

// ChargeRequest is what a charge needs to know of a payment and of how far
// earlier runs got with it.
type ChargeRequest struct {
	Intent        intent.Intent
	Amount        int64
	Currency      string
	PaymentMethod string
	Description   *string
	// KeyCreatedAt is when the client's key was first stored (the
	// database's clock): Stripe's idempotency window runs from about then.
	KeyCreatedAt time.Time
	// Attempt is the Stripe key in use (1 to maxAttempts), and SpentAt,
	// when set, when that key was found to hold a cached server error.
	Attempt int
	SpentAt *time.Time
	// Progress records a spent attempt and the move to the next one,
	// fenced by the run's lease.
	Progress Progress
}

// Progress persists how far a charge got across runs.
type Progress interface {
	// Spent records that attempt holds a cached server error, and returns
	// since when that is known.
	Spent(ctx context.Context, attempt int) (time.Time, error)
	// Next moves the charge from attempt to attempt+1.
	Next(ctx context.Context, attempt int) error
}

// Charge is the definite outcome of charging a payment.
type Charge struct {
	PaymentIntentID string
	// Succeeded is true when the money moved.
	Succeeded bool
	// Declined is true for a card_error: the card was refused.
	Declined bool
	// Code and Message explain a refusal: Stripe's decline or error code
	// and its message.
	Code    string
	Message string
}

// Charge creates and confirms the payment's PaymentIntent, or adopts the one
// an earlier run created, or proves that none was. An error means the
// outcome is still unknown (the engine answers 503 and a later run goes on);
// a *phases.NeedsAttentionError means no machine can settle it.
//
// The rules, in the order they apply:
//   - The Stripe key is the intent's attempt-th key, so a resumed run, or a
//     retry after lost commits, re-sends what the lost run sent and Stripe
//     replays its answer.
//   - A create is sent only while Stripe's idempotency window, less how
//     long Stripe may keep executing it and the visibility margin, is open:
//     then every create we ever sent is finished and visible by the time
//     the window closes, and from there on a lookup alone decides.
//   - A key whose answer is a replayed server error is spent: a 500 is
//     indeterminate, so the PaymentIntent is looked up by a strongly
//     consistent list. Only when it is absent, and the attempt's execution
//     is finished (Stripe replays it) and visible (the margin has passed
//     since we learned it was spent), does the next key's turn come.
//   - An idempotency_error, a PaymentIntent of this intent with another
//     amount or currency, or two of them, need an operator.
func (c *Charger) Charge(ctx context.Context, req *ChargeRequest) (*Charge, error) {
	sendCutoff := req.KeyCreatedAt.Add(StripeIdempotencyWindow - c.cfg.ExecutionBound - c.cfg.VisibilityMargin)
	for time.Now().Before(sendCutoff) {
		if req.SpentAt == nil {
			charge, spent, err := c.send(ctx, req)
			if !spent {
				return charge, err
			}
			at, err := req.Progress.Spent(ctx, req.Attempt)
			if err != nil {
				return nil, err
			}
			req.SpentAt = &at
		}
		pi, err := c.lookup(ctx, req)
		if pi != nil || err != nil {
			return c.adopt(pi, err)
		}
		c.cfg.ObserveLookup("not_found")
		if visible := req.SpentAt.Add(c.cfg.VisibilityMargin); time.Now().Before(visible) {
			return nil, fmt.Errorf("stripe key %d of %d holds a server error and no PaymentIntent is listed yet; "+
				"the next key may be used after %s", req.Attempt, maxAttempts, visible.UTC().Format(time.RFC3339))
		}
		if req.Attempt == maxAttempts {
			c.cfg.ObserveLookup("needs_attention")
			return nil, phases.NeedsAttention("all %d Stripe keys of the payment hold server errors and no PaymentIntent exists", maxAttempts)
		}
		if err := req.Progress.Next(ctx, req.Attempt); err != nil {
			return nil, err
		}
		req.Attempt, req.SpentAt = req.Attempt+1, nil
	}
	return c.reconcile(ctx, req)
}

// send creates the PaymentIntent under the current key. spent reports a
// replayed server error: the key can never succeed again.
func (c *Charger) send(ctx context.Context, req *ChargeRequest) (charge *Charge, spent bool, err error) {
	pi, err := c.create(ctx, req)
	if err == nil {
		if !ownedBy(pi, req) {
			return nil, false, phases.NeedsAttention("Stripe answered key %d with PaymentIntent %s, which is not this payment's", req.Attempt, pi.ID)
		}
		return outcomeOf(pi), false, nil
	}
	var serr *stripe.Error
	if !errors.As(err, &serr) {
		return nil, false, err
	}
	if charge, ok := definite(serr); ok {
		return charge, false, nil
	}
	switch {
	case serr.Type == stripe.ErrorTypeIdempotency && serr.HTTPStatusCode == http.StatusBadRequest:
		// The key was first used with other parameters: it can never
		// succeed, and what it created (if anything) is not this request.
		return nil, false, phases.NeedsAttention("Stripe refused key %d: idempotency_error (%s)", req.Attempt, serr.Msg)
	case serr.HTTPStatusCode >= 500 && serr.LastResponse != nil &&
		serr.LastResponse.Header.Get("Idempotent-Replayed") == "true":
		return nil, true, nil
	}
	return nil, false, err
}

// reconcile decides a payment near or past the end of Stripe's idempotency
// window by lookup alone: never by a create that could be a second charge.
// Nothing found proves "not charged" only once every create ever sent is
// finished and visible, which the send cut-off makes true at the window's
// end.
func (c *Charger) reconcile(ctx context.Context, req *ChargeRequest) (*Charge, error) {
	windowEnd := req.KeyCreatedAt.Add(StripeIdempotencyWindow)
	pi, err := c.lookup(ctx, req)
	switch {
	case err != nil && time.Now().After(windowEnd.Add(c.cfg.LookupGrace)):
		var attention *phases.NeedsAttentionError
		if !errors.As(err, &attention) {
			err = phases.NeedsAttention("lookups past Stripe's idempotency window keep failing: %v", err)
		}
		return c.adopt(nil, err)
	case pi != nil || err != nil:
		return c.adopt(pi, err)
	case time.Now().Before(windowEnd):
		return nil, fmt.Errorf("no PaymentIntent listed yet; one sent near the window's end may still be executing until %s",
			windowEnd.UTC().Format(time.RFC3339))
	}
	c.cfg.ObserveLookup("not_charged")
	return &Charge{Code: "not_charged", Message: "no PaymentIntent was created within Stripe's idempotency window"}, nil
}

// adopt turns a lookup's result into the charge's outcome.
func (c *Charger) adopt(pi *stripe.PaymentIntent, err error) (*Charge, error) {
	var attention *phases.NeedsAttentionError
	switch {
	case errors.As(err, &attention):
		c.cfg.ObserveLookup("needs_attention")
		return nil, err
	case err != nil:
		return nil, err
	}
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded, stripe.PaymentIntentStatusRequiresPaymentMethod, stripe.PaymentIntentStatusCanceled:
		c.cfg.ObserveLookup("adopted")
		return outcomeOf(pi), nil
	}
	// processing, requires_confirmation, …: not final yet.
	return nil, fmt.Errorf("PaymentIntent %s is %s; waiting for a final status", pi.ID, pi.Status)
}

func (c *Charger) create(ctx context.Context, req *ChargeRequest) (*stripe.PaymentIntent, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	params := &stripe.PaymentIntentParams{
		Amount:                stripe.Int64(req.Amount),
		Currency:              stripe.String(req.Currency),
		PaymentMethod:         stripe.String(req.PaymentMethod),
		PaymentMethodTypes:    stripe.StringSlice([]string{"card"}),
		Confirm:               stripe.Bool(true),
		ErrorOnRequiresAction: stripe.Bool(true),
		Description:           req.Description,
	}
	params.Context = ctx
	for k, v := range req.Intent.Metadata() {
		params.AddMetadata(k, v)
	}
	params.SetIdempotencyKey(req.Intent.StripeKey("pi", req.Attempt))
	return c.api.PaymentIntents.New(params)
}
