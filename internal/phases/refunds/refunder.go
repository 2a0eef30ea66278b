package refunds

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/stripeonce"
)

// Refunder creates Stripe Refunds by the rules of package stripeonce.
type Refunder struct {
	api     *client.API
	rules   stripeonce.Rules
	timeout time.Duration
}

// NewRefunder shares the charger's Stripe client and rules.
func NewRefunder(c *payments.Charger) *Refunder {
	return &Refunder{api: c.Client(), rules: c.Rules(), timeout: c.Timeout()}
}

// Request is what a refund needs to know of itself and of how far earlier
// runs got with it.
type Request struct {
	Intent          intent.Intent
	PaymentIntentID string
	Amount          int64
	Currency        string
	Reason          *string
	stripeonce.State
}

// CodeChargeDisputed is Stripe's error code for a refund of a charged-back
// charge: its dispute says is_charge_refundable false (a chargeback took
// the money back), and Stripe refuses any refund of it with a 400
// invalid_request_error, a definite outcome like any other such refusal.
const CodeChargeDisputed = "charge_disputed"

// Outcome is the definite outcome of a refund at Stripe.
type Outcome struct {
	StripeRefundID string
	// Status is Stripe's: succeeded, pending or failed.
	Status        string
	FailureReason string
	// Rejected is set when Stripe refused the refund as invalid, with its
	// code and message: nothing was refunded.
	Rejected      bool
	Code, Message string
}

// Refund creates the refund at Stripe, adopts the one an earlier run
// created, or proves that none was. An error means the outcome is still
// unknown; a *phases.NeedsAttentionError means no machine can settle it.
func (r *Refunder) Refund(ctx context.Context, req *Request) (*Outcome, error) {
	return stripeonce.Do[*Outcome](ctx, r.rules, &req.State, refundOp{r, req})
}

// refundOp is a Refund create as stripeonce drives it.
type refundOp struct {
	r   *Refunder
	req *Request
}

func (refundOp) What() string { return "Refund" }

func (refundOp) NotCreated() *Outcome {
	return &Outcome{Rejected: true, Code: "not_refunded", Message: "no Refund was created within Stripe's idempotency window"}
}

// Send creates the Refund under the attempt-th key.
func (op refundOp) Send(ctx context.Context, attempt int) (*Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, op.r.timeout)
	defer cancel()
	params := &stripe.RefundParams{
		PaymentIntent: stripe.String(op.req.PaymentIntentID),
		Amount:        stripe.Int64(op.req.Amount),
		Reason:        op.req.Reason,
	}
	params.Context = ctx
	for k, v := range op.req.Intent.Metadata() {
		params.AddMetadata(k, v)
	}
	params.SetIdempotencyKey(op.req.Intent.StripeKey("re", attempt))
	refund, err := op.r.api.Refunds.New(params)
	if err == nil {
		if !op.req.Intent.Owns(refund.Metadata) {
			return nil, phases.Conflict("Stripe answered key %d with Refund %s, which is not this refund's", attempt, refund.ID)
		}
		return outcomeOf(refund), nil
	}
	var serr *stripe.Error
	if errors.As(err, &serr) && serr.Type == stripe.ErrorTypeInvalidRequest &&
		serr.HTTPStatusCode >= 400 && serr.HTTPStatusCode < 500 && serr.HTTPStatusCode != http.StatusUnauthorized &&
		serr.HTTPStatusCode != http.StatusConflict && serr.HTTPStatusCode != http.StatusTooManyRequests {
		return &Outcome{Rejected: true, Code: string(serr.Code), Message: serr.Msg}, nil
	}
	return nil, err
}

// Lookup lists the PaymentIntent's refunds (a short, strongly consistent
// list) and adopts the one of this intent, if its amount and currency are
// the request's. A Refund of the intent made before window.SearchSince is
// an earlier use's of the key, reused once its tombstone expired.
func (op refundOp) Lookup(ctx context.Context, window stripeonce.Span) (*Outcome, bool, error) {
	all, err := op.r.list(ctx, op.req.PaymentIntentID, op.req.Intent)
	if err != nil {
		return nil, false, err
	}
	var mine []*stripe.Refund
	for _, r := range all {
		if r.Created >= window.SearchSince.Unix() {
			mine = append(mine, r)
		}
	}
	switch {
	case len(mine) == 0:
		return nil, false, nil
	case len(mine) > 1:
		ids := make([]string, len(mine))
		for i, r := range mine {
			ids[i] = r.ID
		}
		return nil, false, phases.Conflict("more than one Refund carries this refund's intent: %s", strings.Join(ids, ", "))
	case mine[0].Amount != op.req.Amount || string(mine[0].Currency) != op.req.Currency:
		return nil, false, phases.Conflict("Refund %s carries this refund's intent with %d %s, not %d %s",
			mine[0].ID, mine[0].Amount, mine[0].Currency, op.req.Amount, op.req.Currency)
	}
	return outcomeOf(mine[0]), true, nil
}

// outcomeOf reads a Refund's status; a canceled refund moved no money.
func outcomeOf(r *stripe.Refund) *Outcome {
	out := &Outcome{StripeRefundID: r.ID, Status: string(r.Status), FailureReason: string(r.FailureReason)}
	switch r.Status {
	case stripe.RefundStatusSucceeded, stripe.RefundStatusPending, stripe.RefundStatusFailed:
	case stripe.RefundStatusCanceled:
		out.Status, out.FailureReason = StatusFailed, "canceled"
	default: // requires_action and any status to come: not final, not failed
		out.Status = StatusPending
	}
	return out
}

// list returns the PaymentIntent's refunds that carry the intent.
func (r *Refunder) list(ctx context.Context, paymentIntentID string, in intent.Intent) ([]*stripe.Refund, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	params := &stripe.RefundListParams{PaymentIntent: stripe.String(paymentIntentID)}
	params.Limit = stripe.Int64(100)
	params.Context = ctx
	iter := r.api.Refunds.List(params)
	var mine []*stripe.Refund
	for iter.Next() {
		if refund := iter.Refund(); in.Owns(refund.Metadata) {
			mine = append(mine, refund)
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("error listing refunds: %w", err)
	}
	return mine, nil
}
