package captures

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/intent"
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
	// Namespace is the deployment's: with a key's user and
	// Idempotency-Key, it names the intent a capture's metadata must name
	// for the key to be answered the capture as its own.
	Namespace uuid.UUID
	// Outside (may be nil) hears of captures made outside paymentsd.
	Outside ObserveOutside
}

// Settle moves payment, locked in tx and requires_capture, to what pi
// says became of it; the capture or cancel key that claimed it, if any and
// unfinished, finishes with the answer its own run would have stored: a
// capture key 200 only when the capture's metadata names its intent, its
// stored 400 for a capture another key made (whose commits a failover
// lost) or one made outside paymentsd. It returns why it changed nothing,
// or "", as payments.EventSettler.Settle does, or a *phases.AlarmError,
// with the capture recorded all the same, for a capture made outside
// paymentsd. A PaymentIntent still requires_capture (an older event, or
// amount_capturable_updated) changes nothing: the payment only ever moves
// out of requires_capture, so no older event undoes a newer state.
func (s *EventSettler) Settle(ctx context.Context, tx db.Tx, payment *dbsqlc.Payment, pi *stripe.PaymentIntent) (string, error) {
	out, ok := outcomeOf(pi)
	if !ok {
		return fmt.Sprintf("payment %d is requires_capture and PaymentIntent %s is %s", payment.ID, pi.ID, pi.Status), nil
	}
	action, keyID, keyIntent := Capture, payment.CaptureKeyID, ""
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
		keyIntent = intent.Intent{Namespace: s.Namespace, UserID: key.UserID, Key: key.IdempotencyKey}.ID()
	}
	resp, err := recordOutcome(ctx, tx, action, keyIntent, payment, out, s.Receipt, "stripe_event")
	if err != nil {
		return "", err
	}
	if keyID != nil {
		if _, err := s.Engine.FinishFromOutside(ctx, tx, *keyID, resp); err != nil {
			return "", err
		}
	}
	if capturedOutside(out) {
		// Recorded, and kept as an alarm: the webhook handler logs and
		// counts it with the event; the metric of captures made outside
		// paymentsd counts it too, as a run's or an operator's find.
		if s.Outside != nil {
			db.AfterCommit(ctx, func() { s.Outside(FoundByWebhook) })
		}
		return "", phases.Alarm("%s", outsideReason(payment, out))
	}
	return "", nil
}
