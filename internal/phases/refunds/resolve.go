package refunds

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

// Resolver settles refund keys that await an operator, checked against
// Stripe first, audited, and stored as the key's answer: the refund side of
// `paymentsd keys resolve`, where "charged" means "refunded by this Stripe
// Refund".
type Resolver struct {
	Engine    *phases.Engine
	Refunder  *Refunder
	Namespace uuid.UUID
}

// Charged settles key keyID as refunded by Stripe Refund refundID: it must
// refund this payment's PaymentIntent by the refund's amount, not have
// failed, belong to no other intent, and be recorded by no other refund.
// A refund that records another Refund (a second Refund of its intent
// parked its key) is settled by this one only when the recorded Refund
// failed or was canceled: otherwise the recorded one returned (or is
// returning) the money, and this one, if it stands, returned it twice,
// which no answer of the key can record. And a refund recorded succeeded
// is never moved out of succeeded (RefundRecordOutcome guards it too).
//
// Refund refundID is read at Stripe inside the settling transaction,
// after the refund's row is locked and before its key and payment are
// (lock order refund, key, payment, as a webhook takes them): no event of
// any Refund of the refund can be applied between the read and the write.
// Read before the lock, refundID could move (pending to failed, succeeded
// to failed, pending to succeeded) and its event be applied in between,
// recording nothing the resolve could check (an event meeting a key parked
// for a conflict only alarms), and the key be finished for good on a
// stale read: pending on a Refund that failed, its amount held for ever,
// or succeeded on one that returned nothing. An event arriving while the
// Refund is read waits for the refund's lock and applies after the
// commit, to a finished key whose refund records what was read.
//
// This is the one call to Stripe made inside a transaction, and it is
// acceptable here and nowhere else: it is an operator's command, not a
// client's request; it is a read with no side effect, safe to repeat when
// the transaction is retried; and it is the only way to settle against
// Stripe's current word without a race. It holds only the refund's row
// (not the key: the client's retries still answer 503 at once), so only
// webhooks of that one refund wait, at most as long as the read, and an
// event whose delivery times out meanwhile is retried by Stripe. The
// transaction's attempt is bounded by the Stripe timeout plus
// db.TxTimeout (SettleAfterWithin), not db.TxTimeout alone, which a slow
// but healthy Stripe would exceed.
func (r *Resolver) Charged(ctx context.Context, keyID int64, refundID string) (*phases.Response, error) {
	// The Refund the refund records, if another, read before anything is
	// locked; checked unchanged once the refund is. It is only trusted to
	// have failed (or been canceled), which it does not take back.
	var recorded *stripe.Refund
	if pre, err := dbsqlc.New().RefundGetByIdempotencyKeyID(ctx, r.Engine.Pool(), &keyID); err == nil &&
		pre.StripeRefundID != nil && *pre.StripeRefundID != refundID && pre.Status != StatusFailed {
		if recorded, err = r.Refunder.retrieve(ctx, *pre.StripeRefundID); err != nil {
			return nil, err
		}
	} else if err != nil && !errors.Is(err, db.ErrNotFound) {
		return nil, fmt.Errorf("error loading refund of idempotency key %d: %w", keyID, err)
	}
	var sr *stripe.Refund
	lockThenRead := func(ctx context.Context, tx db.Tx) error {
		if err := lockRefundOfKey(keyID)(ctx, tx); err != nil {
			return err
		}
		var err error
		sr, err = r.Refunder.retrieve(ctx, refundID)
		return err
	}
	return r.Engine.SettleAfterWithin(ctx, keyID, r.Refunder.timeout+db.TxTimeout, lockThenRead, func(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey) (*phases.Response, error) {
		st, err := refundOfKey(ctx, tx, key)
		if err != nil {
			return nil, err
		}
		in := intent.Intent{Namespace: r.Namespace, UserID: key.UserID, Key: key.IdempotencyKey}
		switch {
		case sr.PaymentIntent == nil || sr.PaymentIntent.ID != st.paymentIntentID:
			return nil, fmt.Errorf("%w: Refund %s does not refund this payment's PaymentIntent %s", payments.ErrResolutionRefused, sr.ID, st.paymentIntentID)
		case sr.Amount != st.refund.Amount:
			return nil, fmt.Errorf("%w: Refund %s is for %d, the refund for %d", payments.ErrResolutionRefused, sr.ID, sr.Amount, st.refund.Amount)
		case sr.Status == stripe.RefundStatusFailed || sr.Status == stripe.RefundStatusCanceled:
			return nil, fmt.Errorf("%w: Refund %s is %s", payments.ErrResolutionRefused, sr.ID, sr.Status)
		case sr.Metadata[intent.MetadataIntent] != "" && !in.Owns(sr.Metadata):
			return nil, fmt.Errorf("%w: Refund %s belongs to another intent", payments.ErrResolutionRefused, sr.ID)
		}
		if err := secondRefundRule(ctx, tx, st.refund, sr, recorded); err != nil {
			return nil, err
		}
		return settle(ctx, tx, key, st.refund, outcomeOf(sr), "refunded", nil)
	})
}

// secondRefundRule refuses to settle refund, locked, as refunded by sr
// when another refund records sr (stripe_refund_id is unique), when refund
// records another Refund that did not fail (recorded is that Refund as
// Stripe has it, read before the lock; nil when refund was recorded failed
// then), and when it would move a refund recorded succeeded out of
// succeeded.
func secondRefundRule(ctx context.Context, tx db.Tx, refund *dbsqlc.Refund, sr *stripe.Refund, recorded *stripe.Refund) error {
	other, err := dbsqlc.New().RefundGetByStripeRefundID(ctx, tx, &sr.ID)
	switch {
	case err == nil && other.ID != refund.ID:
		return fmt.Errorf("%w: Refund %s is recorded by refund %d: one Refund settles one refund", payments.ErrResolutionRefused, sr.ID, other.ID)
	case err != nil && !errors.Is(err, db.ErrNotFound):
		return fmt.Errorf("error looking up the refund of Refund %s: %w", sr.ID, err)
	}
	if refund.StripeRefundID != nil && *refund.StripeRefundID != sr.ID && refund.Status != StatusFailed {
		first := *refund.StripeRefundID
		switch {
		case recorded == nil || recorded.ID != first:
			return fmt.Errorf("%w: refund %d changed while Stripe was consulted: try again", payments.ErrResolutionRefused, refund.ID)
		case recorded.Status != stripe.RefundStatusFailed && recorded.Status != stripe.RefundStatusCanceled:
			return fmt.Errorf("%w: refund %d records Refund %s, which is %s: resolve it as refunded by %s, and deal with Refund %s "+
				"in Stripe: if both stand, the money was returned twice (docs/operations.md)",
				payments.ErrResolutionRefused, refund.ID, first, recorded.Status, first, sr.ID)
		}
	}
	if status := outcomeOf(sr).Status; refund.Status == StatusSucceeded && status != StatusSucceeded {
		return fmt.Errorf("%w: refund %d is recorded succeeded, and Refund %s is %s: a refund that succeeded is not moved back; "+
			"resolve it once Refund %s succeeded", payments.ErrResolutionRefused, refund.ID, sr.ID, status, sr.ID)
	}
	return nil
}

// NotCharged settles key keyID as not refunded, once Stripe confirms that no
// refund of its intent stands and no create of the key's last run can still
// be executing: the refund fails and gives its amount back,
// and the key answers a stored 400 refund-rejected, processor_code
// not_refunded.
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
	// and the refund it makes would not be listed yet.
	rules := r.Refunder.rules.WithDefaults()
	if quiet := key.LastRunAt.Add(rules.ExecutionBound + rules.VisibilityMargin); time.Now().Before(quiet) {
		return nil, fmt.Errorf("%w: the key's last run, at %s, may have sent a create that Stripe is still executing; try again after %s",
			payments.ErrResolutionRefused, key.LastRunAt.UTC().Format(time.RFC3339), quiet.UTC().Format(time.RFC3339))
	}
	st, err := refundOfKey(ctx, r.Engine.Pool(), key)
	if err != nil {
		return nil, err
	}
	mine, err := r.Refunder.list(ctx, st.paymentIntentID, intent.Intent{Namespace: r.Namespace, UserID: key.UserID, Key: key.IdempotencyKey})
	if err != nil {
		return nil, err
	}
	for _, sr := range mine {
		if sr.Status != stripe.RefundStatusFailed && sr.Status != stripe.RefundStatusCanceled {
			return nil, fmt.Errorf("%w: Refund %s of this intent is %s: resolve it as charged", payments.ErrResolutionRefused, sr.ID, sr.Status)
		}
	}
	// The refund's own Refund, verified failed (or canceled) at Stripe, as
	// every Refund of its intent is: a refund recorded succeeded by it
	// returned nothing after all, and is settled failed (verifiedFailed).
	var verifiedFailed *string
	if own := st.refund.StripeRefundID; own != nil {
		sr := findRefund(mine, *own)
		if sr == nil {
			if sr, err = r.Refunder.retrieve(ctx, *own); err != nil {
				return nil, err
			}
		}
		if sr.Status == stripe.RefundStatusFailed || sr.Status == stripe.RefundStatusCanceled {
			verifiedFailed = own
		}
	}
	return r.Engine.SettleAfter(ctx, keyID, lockRefundOfKey(keyID), func(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey) (*phases.Response, error) {
		st, err := refundOfKey(ctx, tx, key)
		if err != nil {
			return nil, err
		}
		if refund := st.refund; refund.Status == StatusSucceeded &&
			(verifiedFailed == nil || refund.StripeRefundID == nil || *refund.StripeRefundID != *verifiedFailed) {
			return nil, fmt.Errorf("%w: refund %d is recorded succeeded by Refund %s, which Stripe does not show failed: "+
				"a refund that succeeded is not settled as not refunded", payments.ErrResolutionRefused, refund.ID, deref(refund.StripeRefundID))
		}
		out := &Outcome{Rejected: true, Code: "not_refunded", Message: "an operator found that nothing was refunded"}
		return settle(ctx, tx, key, st.refund, out, "not_refunded", verifiedFailed)
	})
}

// findRefund is the Refund of refunds with id id, or nil.
func findRefund(refunds []*stripe.Refund, id string) *stripe.Refund {
	for _, sr := range refunds {
		if sr.ID == id {
			return sr
		}
	}
	return nil
}

// settle records the operator's outcome on the refund and audits it. A
// refund recorded failed (by its run, or by an event of its Refund) that
// the operator settles as refunded takes its amount back from the payment:
// refused when the payment no longer has it. verifiedFailed is the
// refund's own Refund when NotCharged verified it failed at Stripe
// (recordOutcome).
func settle(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey, refund *dbsqlc.Refund, out *Outcome, as string, verifiedFailed *string) (*phases.Response, error) {
	if refund.Status == StatusFailed && !out.Rejected && out.Status != StatusFailed {
		if err := roomFor(ctx, tx, refund, out); err != nil {
			return nil, err
		}
	}
	resp, err := recordOutcome(ctx, tx, refund, out, true, verifiedFailed)
	if err != nil {
		return nil, err
	}
	data, _ := json.Marshal(map[string]any{"idempotency_key_id": key.ID, "as": as, "stripe_refund_id": out.StripeRefundID,
		"parked_because": key.LastError, "resolved_by": "operator"})
	if err := dbsqlc.New().AuditRecordInsert(ctx, tx, &dbsqlc.AuditRecordInsertParams{
		UserID: key.UserID, Action: "refund.resolved", ResourceType: "refund", ResourceID: refund.ID, Data: data,
	}); err != nil {
		return nil, fmt.Errorf("error auditing resolution: %w", err)
	}
	return resp, nil
}

// roomFor locks refund's payment, after the refund and its key, as a
// webhook's RefundTransition does, and refuses to settle as refunded a
// refund recorded failed whose amount the payment no longer has to
// reserve: the failure gave it back, and another refund (the client's
// retry under a new key, told "failed") took it. Unless that one is
// undone, the customer was refunded twice, which no answer of this key
// can record.
func roomFor(ctx context.Context, tx db.Tx, refund *dbsqlc.Refund, out *Outcome) error {
	p, err := dbsqlc.New().PaymentLockForRefund(ctx, tx, &dbsqlc.PaymentLockForRefundParams{UserID: refund.UserID, PublicID: refund.PaymentPublicID})
	if err != nil {
		return fmt.Errorf("error locking payment %d: %w", refund.PaymentID, err)
	}
	if left := p.AmountCaptured - p.AmountReserved; left < refund.Amount {
		return fmt.Errorf("%w: refund %d was recorded failed and gave its %d back to payment %d, which has %d of %d left "+
			"to refund now: other refunds took the rest, and if they stand, Refund %s returned money twice, "+
			"which this key cannot record (docs/operations.md)", payments.ErrResolutionRefused, refund.ID, refund.Amount,
			refund.PaymentID, left, p.AmountCaptured, out.StripeRefundID)
	}
	return nil
}

// lockRefundOfKey locks the refund key keyID made, if any, before the key
// is locked: a webhook settling the refund locks it, then its key
// (ClaimForEvent), and the operator takes them in that order too, so the
// two cannot deadlock (see phases.Engine.SettleAfter). refundOfKey then
// reads it, locked.
func lockRefundOfKey(keyID int64) func(ctx context.Context, tx db.Tx) error {
	return func(ctx context.Context, tx db.Tx) error {
		_, err := dbsqlc.New().RefundLockByIdempotencyKeyID(ctx, tx, &keyID)
		if errors.Is(err, db.ErrNotFound) {
			return nil // refundOfKey says so, once the key is known to be parked
		} else if err != nil {
			return fmt.Errorf("error locking refund of idempotency key %d: %w", keyID, err)
		}
		return nil
	}
}

// refundOfKey is the refund a parked key made, with its PaymentIntent.
func refundOfKey(ctx context.Context, q dbsqlc.DBTX, key *dbsqlc.IdempotencyKey) (state, error) {
	if key.Flow != FlowName {
		return state{}, fmt.Errorf("%w: key %d is a %s, not a refund", payments.ErrResolutionRefused, key.ID, key.Flow)
	}
	return load(ctx, q, key.ID)
}

// retrieve reads one Refund; a missing one is a refusal.
func (r *Refunder) retrieve(ctx context.Context, id string) (*stripe.Refund, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	params := &stripe.RefundParams{}
	params.Context = ctx
	sr, err := r.api.Refunds.Get(id, params)
	var serr *stripe.Error
	if errors.As(err, &serr) && serr.HTTPStatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("%w: Stripe has no Refund %s", payments.ErrResolutionRefused, id)
	}
	return sr, err
}
