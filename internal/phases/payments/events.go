package payments

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// EventSettler applies Stripe's word on a PaymentIntent (its webhook
// events) to the payment made for it: the first authority on an outcome the
// charge path could not learn. It never charges.
type EventSettler struct {
	Engine  *phases.Engine
	Receipt EnqueueReceipt
}

// Settle applies a final PaymentIntent to payment, locked in tx: a payment
// still pending takes the outcome, and its key, if unfinished, finishes
// with the answer the charge path would have stored (and the receipt it
// would have enqueued). It returns why it changed nothing, or "".
func (s *EventSettler) Settle(ctx context.Context, tx pgx.Tx, payment *dbsqlc.Payment, pi *stripe.PaymentIntent) (ignored string, err error) {
	switch {
	case !final(pi):
		return "the PaymentIntent is " + string(pi.Status) + ", not final", nil
	case pi.Amount != payment.Amount || string(pi.Currency) != payment.Currency:
		return fmt.Sprintf("the PaymentIntent is for %d %s, payment %d for %d %s", pi.Amount, pi.Currency,
			payment.ID, payment.Amount, payment.Currency), nil
	case payment.Status != StatusPending:
		if payment.StripePaymentIntentID != nil && *payment.StripePaymentIntentID != pi.ID {
			return fmt.Sprintf("payment %d is %s with PaymentIntent %s", payment.ID, payment.Status, *payment.StripePaymentIntentID), nil
		}
		return fmt.Sprintf("payment %d is %s already", payment.ID, payment.Status), nil
	}
	charge := outcomeOf(pi)
	update := &dbsqlc.PaymentRecordOutcomeParams{ID: payment.ID, Status: StatusSucceeded, StripePaymentIntentID: &pi.ID}
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
