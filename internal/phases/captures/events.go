package captures

import (
	"context"
	"fmt"

	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
)

// EventSettler applies Stripe's word on an authorization (its
// payment_intent.succeeded once captured, payment_intent.canceled once
// canceled, by us or because it expired) to the payment, locked, that
// records it as requires_capture. It never calls Stripe.
type EventSettler struct {
	Engine  *phases.Engine
	Receipt payments.EnqueueReceipt
}

// Settle moves payment, locked in tx and requires_capture, to what pi
// says became of it; the capture or cancel key that claimed it, if any and
// unfinished, finishes with the answer its own run would have stored. It
// returns why it changed nothing, or "", as payments.EventSettler.Settle
// does. A PaymentIntent still requires_capture (an older event, or
// amount_capturable_updated) changes nothing: the payment only ever moves
// out of requires_capture, so no older event undoes a newer state.
func (s *EventSettler) Settle(ctx context.Context, tx db.Tx, payment *dbsqlc.Payment, pi *stripe.PaymentIntent) (string, error) {
	out, ok := outcomeOf(pi)
	if !ok {
		return fmt.Sprintf("payment %d is requires_capture and PaymentIntent %s is %s", payment.ID, pi.ID, pi.Status), nil
	}
	action, keyID := Capture, payment.CaptureKeyID
	if keyID != nil {
		if err := s.Engine.ClaimForEvent(ctx, tx, *keyID); err != nil {
			return "", err
		}
		key, err := dbsqlc.New().IdempotencyKeyGetByID(ctx, tx, *keyID)
		if err != nil {
			return "", fmt.Errorf("error reading idempotency key %d: %w", *keyID, err)
		}
		if key.Flow == CancelFlowName {
			action = Cancel
		}
	}
	resp, err := recordOutcome(ctx, tx, action, payment, out, s.Receipt, "stripe_event")
	if err != nil {
		return "", err
	}
	if keyID != nil {
		if _, err := s.Engine.FinishFromOutside(ctx, tx, *keyID, resp); err != nil {
			return "", err
		}
	}
	return "", nil
}
