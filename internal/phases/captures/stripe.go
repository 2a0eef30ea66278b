package captures

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/stripeonce"
)

// Action is what a flow asks of an authorization.
type Action string

// The two actions.
const (
	Capture Action = "capture"
	Cancel  Action = "cancel"
)

// Stripe captures and cancels PaymentIntents through stripe-go.
type Stripe struct {
	api     *client.API
	timeout time.Duration
	// quiet is how long after a run a request it sent may still take
	// effect at Stripe and become visible (stripeonce.Rules'
	// ExecutionBound and VisibilityMargin).
	quiet time.Duration
	// outside hears of the captures made outside paymentsd that a run or
	// an operator finds.
	outside ObserveOutside
}

// NewStripe shares the charger's Stripe client, timeout and rules; outside
// (may be nil) hears of captures made outside paymentsd.
func NewStripe(c *payments.Charger, outside ObserveOutside) *Stripe {
	rules := c.Rules().WithDefaults()
	return &Stripe{api: c.Client(), timeout: c.Timeout(), quiet: rules.ExecutionBound + rules.VisibilityMargin, outside: outside}
}

// Request is one capture or cancel of a PaymentIntent, and how far earlier
// runs got with it.
type Request struct {
	Action          Action
	Intent          intent.Intent
	PaymentIntentID string
	// AmountToCapture is nil for the whole authorization.
	AmountToCapture *int64
	// Attempt numbers the Stripe key in use; Next moves to the next one
	// (fenced by the run's lease) and returns it.
	Attempt int
	Next    func(ctx context.Context, attempt int) error
}

// Outcome is the PaymentIntent's state once it left requires_capture.
type Outcome struct {
	// Captured is set when it succeeded; AmountCaptured is what it took.
	// CapturedBy is the intent ID the capture's metadata names: the one
	// capture key whose capture took, "" for a capture made outside
	// paymentsd. Only that key is answered the capture as its own.
	Captured       bool
	AmountCaptured int64
	CapturedBy     string
	// Canceled is set when it was canceled (by us, or by Stripe when the
	// authorization expired: Reason automatic).
	Canceled bool
	Reason   string
}

// Do captures or cancels the PaymentIntent and returns what became of it.
// An error means the outcome is still unknown (the engine answers 503 and
// a later run goes on); a *phases.NeedsAttentionError parks the key.
func (s *Stripe) Do(ctx context.Context, req *Request) (*Outcome, error) {
	if req.Attempt > stripeonce.MaxAttempts {
		return nil, phases.NeedsAttention("%s of PaymentIntent %s: %d Stripe keys did nothing and it is still requires_capture",
			req.Action, req.PaymentIntentID, stripeonce.MaxAttempts)
	}
	pi, sendErr := s.send(ctx, req)
	if sendErr == nil {
		if out, ok := outcomeOf(pi); ok {
			return out, nil
		}
	}
	// Any other answer, a refusal included: payment_intent_unexpected_state
	// may be our own earlier capture that succeeded, a 500 may have captured
	// or not, a lost answer says nothing. The PaymentIntent's own state is
	// the truth, and its capture metadata says whose capture it was: this
	// key's, another key's (whose commits a failover lost), or one made
	// outside paymentsd. The outcome carries it; recordOutcome answers the
	// key the capture only when it was its own.
	truth, err := s.retrieve(ctx, req.PaymentIntentID)
	if err != nil {
		return nil, fmt.Errorf("%s of PaymentIntent %s: %v; reading it back: %w", req.Action, req.PaymentIntentID, sendErr, err)
	}
	if out, ok := outcomeOf(truth); ok {
		return out, nil
	}
	if truth.Status != stripe.PaymentIntentStatusRequiresCapture {
		return nil, fmt.Errorf("%s of PaymentIntent %s: %v; it is %s", req.Action, req.PaymentIntentID, sendErr, truth.Status)
	}
	// Still authorized: this key did nothing that took effect, and a
	// request of it still executing at Stripe can only do what the next
	// key's does, once between them (a capture leaves requires_capture
	// once). The next run sends the next key: this one may replay its
	// answer (a cached 500) for ever.
	if err := req.Next(ctx, req.Attempt); err != nil {
		return nil, err
	}
	if sendErr == nil {
		sendErr = fmt.Errorf("Stripe answered %s", pi.Status)
	}
	return nil, fmt.Errorf("%s of PaymentIntent %s under key %d did nothing (%v); the next run sends key %d",
		req.Action, req.PaymentIntentID, req.Attempt, sendErr, req.Attempt+1)
}

// outcomeOf is what became of an authorization, once it is no longer one.
func outcomeOf(pi *stripe.PaymentIntent) (*Outcome, bool) {
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
		return &Outcome{Captured: true, AmountCaptured: pi.AmountReceived, CapturedBy: pi.Metadata[intent.MetadataCaptureIntent]}, true
	case stripe.PaymentIntentStatusCanceled:
		return &Outcome{Canceled: true, Reason: string(pi.CancellationReason)}, true
	}
	return nil, false
}

// send makes the one call under the attempt's key, derived from the
// client's intent: a resumed run re-sends what the lost run sent.
//
// A capture names its intent in the PaymentIntent's metadata, so that
// whoever reads the PaymentIntent back (this key after an ambiguous answer,
// another key, an event, an operator) knows whose capture took. A cancel
// cannot: Stripe's cancel takes no metadata (only cancellation_reason,
// from a fixed list, and expand). A cancel read back is safe to adopt all
// the same. Of our keys only the one that claimed the payment sends a
// cancel (any other is refused at the claim), so a cancel found is this
// key's but for a claim a failover lost or Stripe's own at the end of the
// authorization window; and whoever canceled, a canceled authorization is
// what every cancel asks for and leaves nothing captured, so adopting it
// credits no key with money it did not take.
func (s *Stripe) send(ctx context.Context, req *Request) (*stripe.PaymentIntent, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	key := req.Intent.StripeKey(string(req.Action), req.Attempt)
	if req.Action == Cancel {
		params := &stripe.PaymentIntentCancelParams{}
		params.Context = ctx
		params.SetIdempotencyKey(key)
		return s.api.PaymentIntents.Cancel(req.PaymentIntentID, params)
	}
	params := &stripe.PaymentIntentCaptureParams{AmountToCapture: req.AmountToCapture}
	params.AddMetadata(intent.MetadataCaptureIntent, req.Intent.ID())
	params.Context = ctx
	params.SetIdempotencyKey(key)
	return s.api.PaymentIntents.Capture(req.PaymentIntentID, params)
}

// retrieve reads the PaymentIntent afresh: a retrieve is strongly
// consistent, unlike search.
func (s *Stripe) retrieve(ctx context.Context, id string) (*stripe.PaymentIntent, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	params := &stripe.PaymentIntentParams{}
	params.Context = ctx
	pi, err := s.api.PaymentIntents.Get(id, params)
	if err != nil {
		return nil, err
	}
	if pi == nil {
		return nil, errors.New("Stripe answered no PaymentIntent")
	}
	return pi, nil
}
