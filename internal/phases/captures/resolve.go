package captures

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
	"github.com/paymentsd/paymentsd/internal/phases/payments"
)

// Resolver settles capture and cancel keys that await an operator: the
// captures side of `paymentsd keys resolve`, where "charged" means
// "captured" (by the payment's own PaymentIntent) and "not-charged" means
// "not captured". Every settlement is checked against the PaymentIntent's
// state first, audited, and stored as the key's answer.
type Resolver struct {
	Engine  *phases.Engine
	Stripe  *Stripe
	Receipt payments.EnqueueReceipt
	// Namespace is the deployment's (see EventSettler.Namespace).
	Namespace uuid.UUID
}

// Charged settles key keyID as captured: piID must be the payment's
// PaymentIntent, and Stripe must show it succeeded. The payment is
// recorded captured as Stripe says. A capture key then answers 200 with
// the payment only when the capture's metadata names its intent (the
// operator's word does not make another key's capture, or one made outside
// paymentsd, this key's); otherwise, and for a cancel key, its stored 400.
// A capture made outside paymentsd raises the alarm.
func (r *Resolver) Charged(ctx context.Context, keyID int64, piID string) (*phases.Response, error) {
	pi, err := r.Stripe.retrieveForOperator(ctx, piID)
	if err != nil {
		return nil, err
	}
	var (
		out     *Outcome
		settled *dbsqlc.Payment
	)
	c := &claim{keyID: keyID}
	resp, err := r.Engine.SettleAfter(ctx, keyID, c.lock, func(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey) (*phases.Response, error) {
		action, payment, err := c.of(key)
		if err != nil {
			return nil, err
		}
		switch {
		case payment.StripePaymentIntentID == nil || *payment.StripePaymentIntentID != pi.ID:
			return nil, fmt.Errorf("%w: PaymentIntent %s is not payment %d's", payments.ErrResolutionRefused, pi.ID, payment.ID)
		case pi.Status != stripe.PaymentIntentStatusSucceeded:
			return nil, fmt.Errorf("%w: PaymentIntent %s is %s, not succeeded (captured)", payments.ErrResolutionRefused, pi.ID, pi.Status)
		}
		out, _ = outcomeOf(pi) // succeeded: a capture
		settled = payment
		return r.settle(ctx, tx, key, action, payment, out, "captured")
	})
	// Once committed: a transaction retried or rolled back raises nothing.
	if err == nil && capturedOutside(out) {
		alarmOutside(ctx, r.Stripe.outside, FoundByOperator, settled, out)
	}
	return resp, err
}

// NotCharged settles key keyID as not captured, once no request of its
// last run can still take effect at Stripe and Stripe shows the payment's
// PaymentIntent canceled or still requires_capture. Canceled, the payment
// is recorded canceled (a cancel key answers 200); still authorized, the
// claim is released so that another key may capture or cancel it, and the
// key answers its stored 400.
func (r *Resolver) NotCharged(ctx context.Context, keyID int64) (*phases.Response, error) {
	key, err := dbsqlc.New().IdempotencyKeyGetByID(ctx, r.Engine.Pool(), keyID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, phases.ErrNotAwaitingOperator
	} else if err != nil {
		return nil, err
	}
	if key.NeedsAttentionAt == nil {
		return nil, phases.ErrNotAwaitingOperator
	}
	if quiet := key.LastRunAt.Add(r.Stripe.quiet); time.Now().Before(quiet) {
		return nil, fmt.Errorf("%w: the key's last run, at %s, may have sent a request that Stripe is still executing; try again after %s",
			payments.ErrResolutionRefused, key.LastRunAt.UTC().Format(time.RFC3339), quiet.UTC().Format(time.RFC3339))
	}
	payment, err := dbsqlc.New().PaymentGetByCaptureKeyID(ctx, r.Engine.Pool(), &key.ID)
	if err != nil || payment.StripePaymentIntentID == nil {
		return nil, fmt.Errorf("%w: key %d claimed no authorized payment", payments.ErrResolutionRefused, key.ID)
	}
	pi, err := r.Stripe.retrieveForOperator(ctx, *payment.StripePaymentIntentID)
	if err != nil {
		return nil, err
	}
	if pi.Status == stripe.PaymentIntentStatusSucceeded {
		return nil, fmt.Errorf("%w: PaymentIntent %s was captured: resolve it as charged", payments.ErrResolutionRefused, pi.ID)
	}
	c := &claim{keyID: keyID}
	return r.Engine.SettleAfter(ctx, keyID, c.lock, func(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey) (*phases.Response, error) {
		action, payment, err := c.of(key)
		if err != nil {
			return nil, err
		}
		switch pi.Status {
		case stripe.PaymentIntentStatusCanceled:
			return r.settle(ctx, tx, key, action, payment, &Outcome{Canceled: true}, "canceled")
		case stripe.PaymentIntentStatusRequiresCapture:
			released, err := dbsqlc.New().PaymentReleaseCapture(ctx, tx, &dbsqlc.PaymentReleaseCaptureParams{ID: payment.ID, CaptureKeyID: &key.ID})
			if err != nil {
				return nil, fmt.Errorf("error releasing payment %d: %w", payment.ID, err)
			}
			as := "not_captured"
			if action == Cancel {
				as = "not_canceled"
			}
			if err := audit(ctx, tx, key, released.ID, as); err != nil {
				return nil, err
			}
			return refusal(action, released, fmt.Sprintf(
				"An operator found that this request did not %s payment %s; it is still authorized: send a new request.",
				action, payments.ID(released))), nil
		}
		return nil, fmt.Errorf("%w: PaymentIntent %s is %s", payments.ErrResolutionRefused, pi.ID, pi.Status)
	})
}

// settle records out as the outcome of the key's claim, audited.
func (r *Resolver) settle(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey, action Action, payment *dbsqlc.Payment,
	out *Outcome, as string) (*phases.Response, error) {
	in := intent.Intent{Namespace: r.Namespace, UserID: key.UserID, Key: key.IdempotencyKey}
	resp, err := recordOutcome(ctx, tx, action, in.ID(), payment, out, r.Receipt, "operator")
	if errors.Is(err, db.ErrNotFound) {
		return nil, fmt.Errorf("%w: payment %d is %s already", payments.ErrResolutionRefused, payment.ID, payment.Status)
	} else if err != nil {
		return nil, err
	}
	return resp, audit(ctx, tx, key, payment.ID, as)
}

// claim is the payment a parked capture or cancel key claimed, locked
// before the key: a webhook settling the payment locks it, then the
// claiming key (ClaimForEvent), and the operator takes them in that order
// too, so the two cannot deadlock (see phases.Engine.SettleAfter).
type claim struct {
	keyID   int64
	payment *dbsqlc.Payment // nil: the key claims no payment
}

// lock locks the payment the key claims, if any, in tx.
func (c *claim) lock(ctx context.Context, tx db.Tx) error {
	q := dbsqlc.New()
	p, err := q.PaymentGetByCaptureKeyID(ctx, tx, &c.keyID)
	if errors.Is(err, db.ErrNotFound) {
		c.payment = nil // of says so, once the key is known to be parked
		return nil
	} else if err != nil {
		return fmt.Errorf("error loading the payment of idempotency key %d: %w", c.keyID, err)
	}
	p, err = q.PaymentLockForCapture(ctx, tx, &dbsqlc.PaymentLockForCaptureParams{UserID: p.UserID, PublicID: p.PublicID})
	if err != nil {
		return fmt.Errorf("error locking the payment of idempotency key %d: %w", c.keyID, err)
	}
	// The locking read returns the row as it now stands: the claim may
	// have been released since the plain read found it.
	if p.CaptureKeyID == nil || *p.CaptureKeyID != c.keyID {
		p = nil
	}
	c.payment = p
	return nil
}

// of is the action of the parked key and the payment it claimed, locked.
func (c *claim) of(key *dbsqlc.IdempotencyKey) (Action, *dbsqlc.Payment, error) {
	action := Capture
	switch key.Flow {
	case CaptureFlowName:
	case CancelFlowName:
		action = Cancel
	default:
		return "", nil, fmt.Errorf("%w: key %d is a %s, not a capture or cancel", payments.ErrResolutionRefused, key.ID, key.Flow)
	}
	if c.payment == nil {
		return "", nil, fmt.Errorf("error loading the payment of idempotency key %d: %w", key.ID, db.ErrNotFound)
	}
	return action, c.payment, nil
}

// audit records the operator's settlement.
func audit(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey, paymentID int64, as string) error {
	data, err := json.Marshal(map[string]any{
		"idempotency_key_id": key.ID, "as": as, "parked_because": key.LastError, "resolved_by": "operator",
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

// retrieveForOperator reads a PaymentIntent; a missing one is a refusal.
func (s *Stripe) retrieveForOperator(ctx context.Context, id string) (*stripe.PaymentIntent, error) {
	pi, err := s.retrieve(ctx, id)
	var serr *stripe.Error
	if errors.As(err, &serr) && serr.HTTPStatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%w: Stripe has no PaymentIntent %s", payments.ErrResolutionRefused, id)
	}
	return pi, err
}
