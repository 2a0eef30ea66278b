package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/stripeonce"
)

// ErrResolutionRefused means what an operator asserted contradicts Stripe.
var ErrResolutionRefused = errors.New("resolution refused")

// Resolver settles payment keys that await an operator. Every settlement is
// checked against Stripe first, audited, and stored as the key's answer.
type Resolver struct {
	Engine    *phases.Engine
	Charger   *Charger
	Namespace uuid.UUID
	Receipt   EnqueueReceipt
}

// Charged settles key keyID as charged by PaymentIntent piID: the
// PaymentIntent must have succeeded for the payment's amount and currency,
// and must not belong to another intent. The key then answers 201 with the
// payment, which gets its receipt like any other.
func (r *Resolver) Charged(ctx context.Context, keyID int64, piID string) (*phases.Response, error) {
	pi, err := r.Charger.retrieve(ctx, piID)
	if err != nil {
		return nil, err
	}
	q := dbsqlc.New()
	return r.Engine.SettleAfter(ctx, keyID, lockPaymentOfKey(keyID), func(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey) (*phases.Response, error) {
		payment, err := paymentOfKey(ctx, tx, key)
		if err != nil {
			return nil, err
		}
		in := intent.Intent{Namespace: r.Namespace, UserID: key.UserID, Key: key.IdempotencyKey}
		if err := chargeOf(pi, payment, in); err != nil {
			return nil, err
		}
		charge := outcomeOf(pi)
		status := StatusSucceeded
		if charge.Authorized {
			status = StatusRequiresCapture
		}
		row, err := q.PaymentRecordOutcome(ctx, tx, &dbsqlc.PaymentRecordOutcomeParams{
			ID: payment.ID, Status: status, StripePaymentIntentID: &pi.ID, AmountCaptured: charge.AmountCaptured,
		})
		if err != nil {
			if db.IsUniqueViolation(err, "payments_stripe_payment_intent_id_key") {
				return nil, fmt.Errorf("%w: PaymentIntent %s is recorded on another payment", ErrResolutionRefused, pi.ID)
			}
			return nil, fmt.Errorf("error recording charge: %w", err)
		}
		if err := auditResolution(ctx, tx, key, payment.ID, "charged", pi.ID); err != nil {
			return nil, err
		}
		if status == StatusSucceeded {
			if err := r.Receipt(ctx, tx, payment.ID); err != nil {
				return nil, err
			}
		}
		return createdResponse((*dbsqlc.Payment)(row)), nil
	})
}

// chargeOf refuses a PaymentIntent that cannot be the payment's charge.
// Each check is a guard of its own, run for every payment whatever the
// PaymentIntent's status: only which statuses count as charged depends on
// the capture method (a manual payment's charge is its authorization).
// The amount, currency and intent checks must never be skipped, or a
// capture would later take another customer's authorization.
func chargeOf(pi *stripe.PaymentIntent, payment *dbsqlc.Payment, in intent.Intent) error {
	charged := pi.Status == stripe.PaymentIntentStatusSucceeded ||
		(pi.Status == stripe.PaymentIntentStatusRequiresCapture && payment.CaptureMethod == CaptureManual)
	if !charged {
		want := "succeeded"
		if payment.CaptureMethod == CaptureManual {
			want = "succeeded or requires_capture"
		}
		return fmt.Errorf("%w: PaymentIntent %s is %s, not %s", ErrResolutionRefused, pi.ID, pi.Status, want)
	}
	if pi.Amount != payment.Amount || string(pi.Currency) != payment.Currency {
		return fmt.Errorf("%w: PaymentIntent %s is for %d %s, the payment for %d %s",
			ErrResolutionRefused, pi.ID, pi.Amount, pi.Currency, payment.Amount, payment.Currency)
	}
	if pi.Metadata[intent.MetadataIntent] != "" && !in.Owns(pi.Metadata) {
		return fmt.Errorf("%w: PaymentIntent %s belongs to another intent", ErrResolutionRefused, pi.ID)
	}
	return nil
}

// NotCharged settles key keyID as not charged, once Stripe confirms that
// every PaymentIntent of its intent for the payment's amount and currency
// is in a state that can no longer charge (requires_payment_method,
// canceled) and no create of its last run can still be executing. One for
// another amount is another request's, made under the same key before the
// database lost it. The key then answers with a stored
// 400 payment-rejected whose processor_code is not_charged.
func (r *Resolver) NotCharged(ctx context.Context, keyID int64) (*phases.Response, error) {
	key, err := dbsqlc.New().IdempotencyKeyGetByID(ctx, r.Engine.Pool(), keyID)
	if err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, phases.ErrNotAwaitingOperator
		}
		return nil, err
	}
	if key.NeedsAttentionAt == nil {
		return nil, phases.ErrNotAwaitingOperator
	}
	// A create sent in the key's last run may still be executing at Stripe,
	// and what it makes would not be listed yet.
	rules := r.Charger.Rules().WithDefaults()
	quiet := key.LastRunAt.Add(rules.ExecutionBound + rules.VisibilityMargin)
	if time.Now().Before(quiet) {
		return nil, fmt.Errorf("%w: the key's last run, at %s, may have sent a create that Stripe is still executing; try again after %s",
			ErrResolutionRefused, key.LastRunAt.UTC().Format(time.RFC3339), quiet.UTC().Format(time.RFC3339))
	}
	// Everything the intent ever made, as a run's lookup looks for it:
	// search, and a list over what search may not cover yet. The key's
	// record does not bound it: a failover may have lost earlier sends.
	payment, err := dbsqlc.New().PaymentGetByIdempotencyKeyID(ctx, r.Engine.Pool(), &key.ID)
	if err != nil {
		return nil, fmt.Errorf("error loading payment of idempotency key %d: %w", key.ID, err)
	}
	req := &ChargeRequest{Intent: intent.Intent{Namespace: r.Namespace, UserID: key.UserID, Key: key.IdempotencyKey}}
	st := &stripeonce.State{KeyCreatedAt: key.CreatedAt}
	window := st.Lookup(rules, quiet)
	found, err := r.Charger.find(ctx, req, window)
	if errors.Is(err, errListTooLong) {
		return nil, fmt.Errorf("%w: %v; search covers them after %s: try again then", ErrResolutionRefused, err,
			window.Until.Add(rules.SearchLag+rules.LookupLookback).UTC().Format(time.RFC3339))
	}
	if err != nil {
		return nil, err
	}
	for _, pi := range found {
		if pi.Amount != payment.Amount || string(pi.Currency) != payment.Currency {
			// Another request's, made under the same key before the
			// database lost it (Stripe then refuses this one's params
			// with idempotency_error): not this payment's charge.
			continue
		}
		switch pi.Status {
		case stripe.PaymentIntentStatusSucceeded:
			return nil, fmt.Errorf("%w: PaymentIntent %s of this intent succeeded: resolve it as charged", ErrResolutionRefused, pi.ID)
		case stripe.PaymentIntentStatusRequiresPaymentMethod, stripe.PaymentIntentStatusCanceled:
		default:
			return nil, fmt.Errorf("%w: PaymentIntent %s of this intent is %s and may still charge: wait for its outcome",
				ErrResolutionRefused, pi.ID, pi.Status)
		}
	}
	return r.Engine.SettleAfter(ctx, keyID, lockPaymentOfKey(keyID), func(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey) (*phases.Response, error) {
		payment, err := paymentOfKey(ctx, tx, key)
		if err != nil {
			return nil, err
		}
		charge := &Charge{Code: "not_charged", Message: "an operator found that nothing was charged"}
		row, err := dbsqlc.New().PaymentRecordOutcome(ctx, tx, &dbsqlc.PaymentRecordOutcomeParams{
			ID: payment.ID, Status: StatusFailed, FailureCode: &charge.Code, FailureMessage: &charge.Message,
		})
		if err != nil {
			return nil, fmt.Errorf("error recording outcome: %w", err)
		}
		if err := auditResolution(ctx, tx, key, payment.ID, "not_charged", ""); err != nil {
			return nil, err
		}
		return rejectedResponse((*dbsqlc.Payment)(row), charge), nil
	})
}

// lockPaymentOfKey locks the payment key keyID made, if any, before the
// key is locked: a webhook settling the payment locks it, then its key
// (ClaimForEvent), and the operator takes them in that order too, so the
// two cannot deadlock (see phases.Engine.SettleAfter). paymentOfKey then
// reads it, locked.
func lockPaymentOfKey(keyID int64) func(ctx context.Context, tx db.Tx) error {
	return func(ctx context.Context, tx db.Tx) error {
		q := dbsqlc.New()
		p, err := q.PaymentGetByIdempotencyKeyID(ctx, tx, &keyID)
		if errors.Is(err, db.ErrNotFound) {
			return nil // paymentOfKey says so, once the key is known to be parked
		} else if err != nil {
			return fmt.Errorf("error loading payment of idempotency key %d: %w", keyID, err)
		}
		// The payment's row lock, as every capture and cancel takes it.
		if _, err := q.PaymentLockForCapture(ctx, tx, &dbsqlc.PaymentLockForCaptureParams{UserID: p.UserID, PublicID: p.PublicID}); err != nil {
			return fmt.Errorf("error locking payment of idempotency key %d: %w", keyID, err)
		}
		return nil
	}
}

// paymentOfKey is the payment a parked key made; only payment keys are
// settled here.
func paymentOfKey(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey) (*dbsqlc.Payment, error) {
	if key.Flow != FlowName {
		return nil, fmt.Errorf("%w: key %d is a %s (%s %s), not a payment", ErrResolutionRefused, key.ID, key.Flow, key.RequestMethod, key.RequestPath)
	}
	p, err := dbsqlc.New().PaymentGetByIdempotencyKeyID(ctx, tx, &key.ID)
	if err != nil {
		return nil, fmt.Errorf("error loading payment of idempotency key %d: %w", key.ID, err)
	}
	return p, nil
}

// auditResolution records who settled what: the operator's word, and the
// error that had parked the key.
func auditResolution(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey, paymentID int64, as, piID string) error {
	data, err := json.Marshal(map[string]any{
		"idempotency_key_id": key.ID, "as": as, "stripe_payment_intent_id": piID,
		"parked_because": key.LastError, "resolved_by": "operator",
	})
	if err != nil {
		return err
	}
	if err := dbsqlc.New().AuditRecordInsert(ctx, tx, &dbsqlc.AuditRecordInsertParams{
		UserID: key.UserID, Action: "payment.resolved", ResourceType: "payment", ResourceID: paymentID, Data: data,
	}); err != nil {
		return fmt.Errorf("error auditing resolution: %w", err)
	}
	return nil
}

// retrieve reads one PaymentIntent; a missing one is a refusal.
func (c *Charger) retrieve(ctx context.Context, id string) (*stripe.PaymentIntent, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	params := &stripe.PaymentIntentParams{}
	params.Context = ctx
	pi, err := c.api.PaymentIntents.Get(id, params)
	var serr *stripe.Error
	if errors.As(err, &serr) && serr.HTTPStatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%w: Stripe has no PaymentIntent %s", ErrResolutionRefused, id)
	}
	return pi, err
}
