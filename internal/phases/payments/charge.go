package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/stripeonce"
)

// ChargeRequest is what a charge needs to know of a payment and of how far
// earlier runs got with it.
type ChargeRequest struct {
	Intent        intent.Intent
	Amount        int64
	Currency      string
	PaymentMethod string
	Description   *string
	// CaptureMethod is CaptureAutomatic or CaptureManual (authorize only).
	CaptureMethod string
	// State is how far earlier runs got: the Stripe key in use, and since
	// when it is known to be spent.
	stripeonce.State
}

// Charge is the definite outcome of charging a payment.
type Charge struct {
	PaymentIntentID string
	// Succeeded is true when the money moved, or, with Authorized, when a
	// manual payment's card was authorized for it.
	Succeeded bool
	// Authorized is set with Succeeded for a manual payment that awaits
	// its capture.
	Authorized bool
	// AmountCaptured is what Stripe took (its amount_received).
	AmountCaptured int64
	// Declined is true for a card_error: the card was refused.
	Declined bool
	// Code and Message explain a refusal: Stripe's decline or error code
	// and its message.
	Code    string
	Message string
}

// Charge creates and confirms the payment's PaymentIntent, adopts the one an
// earlier run created, or proves that none was, by the rules of package
// stripeonce. An error means the outcome is still unknown (the engine
// answers 503 and a later run goes on); a *phases.NeedsAttentionError means
// no machine can settle it.
func (c *Charger) Charge(ctx context.Context, req *ChargeRequest) (*Charge, error) {
	return stripeonce.Do[*Charge](ctx, c.rules, &req.State, chargeOp{c, req})
}

// chargeOp is a PaymentIntent create as stripeonce drives it.
type chargeOp struct {
	c   *Charger
	req *ChargeRequest
}

func (chargeOp) What() string { return "PaymentIntent" }

func (chargeOp) NotCreated() *Charge {
	return &Charge{Code: "not_charged", Message: "no PaymentIntent was created within Stripe's idempotency window"}
}

// Send creates the PaymentIntent under the attempt-th key.
func (op chargeOp) Send(ctx context.Context, attempt int) (*Charge, error) {
	pi, err := op.c.create(ctx, op.req, attempt)
	if err == nil {
		if !ownedBy(pi, op.req) {
			return nil, phases.Conflict("Stripe answered key %d with PaymentIntent %s, which is not this payment's", attempt, pi.ID)
		}
		return op.c.settled(ctx, pi)
	}
	var serr *stripe.Error
	if errors.As(err, &serr) {
		if charge, ok := definite(serr); ok {
			return charge, nil
		}
	}
	return nil, err
}

// Lookup adopts the intent's PaymentIntent once its status is final.
func (op chargeOp) Lookup(ctx context.Context, window stripeonce.Span) (*Charge, bool, error) {
	pi, err := op.c.lookup(ctx, op.req, window)
	switch {
	case err != nil:
		return nil, false, err
	case pi == nil:
		return nil, false, nil
	}
	charge, err := op.c.settled(ctx, pi)
	return charge, err == nil, err
}

// settled is the outcome of pi once its status is final: read afresh when
// the answer in hand is not (a replayed answer keeps its first status), and
// otherwise still unknown.
func (c *Charger) settled(ctx context.Context, pi *stripe.PaymentIntent) (*Charge, error) {
	if !final(pi) {
		ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
		params := &stripe.PaymentIntentParams{}
		params.Context = ctx
		fresh, err := c.api.PaymentIntents.Get(pi.ID, params)
		if err != nil {
			return nil, fmt.Errorf("error reading PaymentIntent %s, which was %s: %w", pi.ID, pi.Status, err)
		}
		if pi = fresh; !final(pi) {
			return nil, fmt.Errorf("PaymentIntent %s is %s; waiting for a final status", pi.ID, pi.Status)
		}
	}
	return outcomeOf(pi), nil
}

func (c *Charger) create(ctx context.Context, req *ChargeRequest, attempt int) (*stripe.PaymentIntent, error) {
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
	if req.CaptureMethod == CaptureManual {
		// Only for manual: an automatic request's parameters stay what
		// they were, so a key sent before manual capture existed is
		// replayed by Stripe, not refused as another request.
		params.CaptureMethod = stripe.String(string(stripe.PaymentIntentCaptureMethodManual))
	}
	params.Context = ctx
	for k, v := range req.Intent.Metadata() {
		params.AddMetadata(k, v)
	}
	params.SetIdempotencyKey(req.Intent.StripeKey("pi", attempt))
	return c.api.PaymentIntents.New(params)
}
