package payments

import (
	"context"
	"errors"
	"fmt"

	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// EventSettler applies Stripe's word on a PaymentIntent (its webhook
// events) to the payment made for it: the first authority on an outcome the
// charge path could not learn. It never charges.
type EventSettler struct {
	Engine  *phases.Engine
	Receipt EnqueueReceipt
	// Captures, when set, applies Stripe's word on an authorized manual
	// payment (captured, canceled) once its authorization is recorded;
	// it returns why it changed nothing, as Settle does.
	Captures func(ctx context.Context, tx db.Tx, payment *dbsqlc.Payment, pi *stripe.PaymentIntent) (string, error)
}

// Settle applies a final PaymentIntent to payment, locked in tx: a payment
// still pending takes the outcome, and its key, if unfinished, finishes
// with the answer the charge path would have stored (and the receipt it
// would have enqueued). It returns why it changed nothing, or "", or a
// *phases.AlarmError when Stripe's word contradicts what is recorded:
// a PaymentIntent of this intent with another amount, a key parked for a
// conflict (the operator's alone), money taken or held (an authorization)
// for a payment recorded as failed or not charged (its key goes back to the
// operator, from its tombstone if the reaper took it), or a second
// PaymentIntent that succeeded or was authorized for one payment.
func (s *EventSettler) Settle(ctx context.Context, tx db.Tx, payment *dbsqlc.Payment, pi *stripe.PaymentIntent) (ignored string, err error) {
	switch {
	case !final(pi):
		return "the PaymentIntent is " + string(pi.Status) + ", not final", nil
	case pi.Amount != payment.Amount || string(pi.Currency) != payment.Currency:
		return "", phases.Alarm("PaymentIntent %s is %s for %d %s, payment %d for %d %s", pi.ID, pi.Status,
			pi.Amount, pi.Currency, payment.ID, payment.Amount, payment.Currency)
	case payment.Status != StatusPending:
		return s.contradicts(ctx, tx, payment, pi)
	}
	if payment.IdempotencyKeyID != nil {
		if err := s.Engine.ClaimForEvent(ctx, tx, *payment.IdempotencyKeyID); err != nil {
			return "", err
		}
	}
	charge := outcomeOf(pi)
	update := &dbsqlc.PaymentRecordOutcomeParams{ID: payment.ID, Status: StatusSucceeded, StripePaymentIntentID: &pi.ID,
		AmountCaptured: charge.AmountCaptured}
	if charge.Authorized {
		update.Status = StatusRequiresCapture
	}
	if !charge.Succeeded {
		update.Status, update.FailureCode, update.FailureMessage = StatusFailed, &charge.Code, &charge.Message
	}
	row, err := dbsqlc.New().PaymentRecordOutcome(ctx, tx, update)
	if err != nil {
		return "", fmt.Errorf("error recording charge: %w", err)
	}
	paid := (*dbsqlc.Payment)(row)
	resp := declinedResponse(paid, charge)
	if charge.Succeeded {
		resp = createdResponse(paid)
	}
	if paid.Status == StatusSucceeded {
		if err := s.Receipt(ctx, tx, paid.ID); err != nil {
			return "", err
		}
	}
	if paid.IdempotencyKeyID != nil {
		if _, err := s.Engine.FinishFromOutside(ctx, tx, *paid.IdempotencyKeyID, resp); err != nil {
			return "", err
		}
	}
	return "", nil
}

// contradicts weighs a final PaymentIntent against a payment whose outcome
// is recorded already: the same word again, an older one, or a failure that
// changes nothing, is ignored; money taken (succeeded) or held (an
// authorization, requires_capture) that the record does not show is an
// alarm.
func (s *EventSettler) contradicts(ctx context.Context, tx db.Tx, payment *dbsqlc.Payment, pi *stripe.PaymentIntent) (string, error) {
	recorded := ""
	if payment.StripePaymentIntentID != nil {
		recorded = *payment.StripePaymentIntentID
	}
	if payment.Status == StatusRequiresCapture && recorded == pi.ID {
		// An authorization's later life (captured, canceled) is the
		// capture flow's to settle (package captures), not a charge's.
		if s.Captures == nil {
			return fmt.Sprintf("payment %d is %s; its PaymentIntent is %s", payment.ID, payment.Status, pi.Status), nil
		}
		return s.Captures(ctx, tx, payment, pi)
	}
	held := HoldsFunds(pi)
	switch {
	case recorded == pi.ID && (!held || payment.Status == StatusSucceeded ||
		(pi.Status == stripe.PaymentIntentStatusRequiresCapture && payment.Status == StatusCanceled)):
		// The same word again, or an older one: the authorization of a
		// payment since captured or canceled.
		return fmt.Sprintf("payment %d is %s already", payment.ID, payment.Status), nil
	case !held:
		return fmt.Sprintf("payment %d is %s with PaymentIntent %s; %s took no money", payment.ID, payment.Status, recorded, pi.ID), nil
	case payment.Status == StatusSucceeded && pi.Status == stripe.PaymentIntentStatusSucceeded:
		return "", phases.Alarm("PaymentIntent %s succeeded for payment %d, which was charged by PaymentIntent %s: a second charge to refund",
			pi.ID, payment.ID, recorded)
	case payment.Status == StatusSucceeded || payment.Status == StatusRequiresCapture:
		// A payment charged or authorized by one PaymentIntent, and
		// another of its intent holds money too.
		did, what, undo, _ := fundsWords(pi)
		return "", phases.Alarm("PaymentIntent %s %s for payment %d, which is %s with PaymentIntent %s: a second %s to %s",
			pi.ID, did, payment.ID, payment.Status, recorded, what, undo)
	}
	did, _, _, customer := fundsWords(pi)
	why := fmt.Sprintf("PaymentIntent %s %s for payment %d, recorded %s (%s): the customer was %s",
		pi.ID, did, payment.ID, payment.Status, deref(payment.FailureCode), customer)
	if payment.IdempotencyKeyID != nil {
		if _, err := s.Engine.Reopen(ctx, tx, *payment.IdempotencyKeyID, PaymentCreated, why+"; resolve it as charged"); err != nil {
			return "", err
		}
		return "", phases.Alarm("%s", why)
	}
	// The key that answered "not charged" was reaped: bring it back from
	// its tombstone, or the client keeps the tombstone's 422 and the
	// operator has nothing to settle.
	keyID, restored, err := s.Engine.Restore(ctx, tx, phases.Reaped{
		ResourceType: "payment", ResourceID: payment.ID, Method: Method, Path: Path,
		Flow: FlowName, CreatedAt: payment.CreatedAt,
	}, PaymentCreated, why+"; its key was reaped and is back for an operator: resolve it as charged")
	var inUse *phases.KeyInUseError
	switch {
	case errors.As(err, &inUse):
		return "", phases.Alarm("%s; its key was reaped, and key %d holds its idempotency key now: not brought back, "+
			"its tombstone kept (docs/operations.md)", why, inUse.KeyID)
	case err != nil:
		return "", err
	case !restored:
		return "", phases.Alarm("%s; its key was reaped and its tombstone is gone too: no key to resolve (docs/operations.md)", why)
	}
	if _, err := dbsqlc.New().PaymentLinkRestoredKey(ctx, tx, &dbsqlc.PaymentLinkRestoredKeyParams{ID: payment.ID, IdempotencyKeyID: &keyID}); err != nil {
		return "", fmt.Errorf("error linking payment %d to its restored key: %w", payment.ID, err)
	}
	return "", phases.Alarm("%s; its reaped key %d is back for an operator", why, keyID)
}

// HoldsFunds reports whether pi took the customer's money (succeeded) or
// holds it (requires_capture: a manual payment's authorization, which a
// capture may still take).
func HoldsFunds(pi *stripe.PaymentIntent) bool {
	return pi.Status == stripe.PaymentIntentStatusSucceeded || pi.Status == stripe.PaymentIntentStatusRequiresCapture
}

// fundsWords words an alarm for a PaymentIntent that holds funds: what it
// did, what it is, what undoes it, and what became of the customer.
func fundsWords(pi *stripe.PaymentIntent) (did, what, undo, customer string) {
	if pi.Status == stripe.PaymentIntentStatusRequiresCapture {
		return "is requires_capture", "authorization", "cancel", "authorized (funds held)"
	}
	return "succeeded", "charge", "refund", "charged"
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
