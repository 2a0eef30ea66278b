package refunds

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// EventSettler applies Stripe's word on a Refund (refund.updated and the
// like) to the refund made for it.
type EventSettler struct {
	Engine *phases.Engine
}

// Settle moves refund, locked in tx, to the status Stripe gave it at at: an
// older event than the status it has changes nothing, and a failed refund
// stays failed. A refund whose outcome was unknown also finishes its key
// with the answer the refund flow would have stored. It returns why it
// changed nothing, or "", or a *phases.AlarmError when Stripe's word
// contradicts what is recorded: a Refund of this intent with another
// amount, a key parked for a conflict (the operator's alone), a second
// Refund of the refund's intent that returned (or is returning) money, or
// money moving for a refund recorded as failed or not refunded by its own
// Refund. A second Refund, or money moving for a refund recorded failed,
// hands its key back to the operator, parked for a conflict, from its
// tombstone if the reaper took it. So does the refund's own Refund failing
// when a second Refund its key was handed over for returned (or was
// returning) the money: the refund is not recorded failed then.
func (s *EventSettler) Settle(ctx context.Context, tx db.Tx, refund *dbsqlc.Refund, sr *stripe.Refund, at time.Time) (ignored string, err error) {
	status := outcomeOf(sr).Status
	handed, err := secondRefundsOf(refund)
	if err != nil {
		return "", err
	}
	switch {
	case refund.StripeRefundID != nil && *refund.StripeRefundID != sr.ID && refund.Status == StatusFailed && status != StatusFailed:
		// Before any check of order, as below: a second Refund of the
		// intent of a refund recorded failed returns (or is returning)
		// the money the refund's key says was not returned. A client
		// told "failed" would refund again under a new key.
		why := fmt.Sprintf("Refund %s of refund %d's intent is %s for %d, and refund %d was recorded failed (%s) by Refund %s: "+
			"money %s for a refund answered failed", sr.ID, refund.ID, status, sr.Amount, refund.ID,
			deref(refund.FailureReason), *refund.StripeRefundID, moved(status))
		return "", s.reopenOnce(ctx, tx, refund, sr, status, why, "; resolve it as refunded by "+sr.ID)
	case refund.StripeRefundID != nil && *refund.StripeRefundID != sr.ID:
		// Before any check of order: the money of a second Refund is
		// returned whatever this event's time. Nothing recorded is its,
		// and the refund's key is not settled by it. Unless it returned
		// nothing, its key goes back to the operator, parked for a
		// conflict: a pending refund's own Refund may still fail, and its
		// event would answer "failed" for money this one returned (a
		// client told so refunds again); a succeeded one returned the
		// money twice, which only the operator can weigh.
		if status == StatusFailed {
			if err := recordSecondFailed(ctx, tx, refund, sr, handed); err != nil {
				return "", err
			}
			return fmt.Sprintf("Refund %s of refund %d's intent is %s: a second Refund, which returned nothing (refund %d records Refund %s)",
				sr.ID, refund.ID, sr.Status, refund.ID, *refund.StripeRefundID), nil
		}
		// The refund records a Refund that did not fail (that case is
		// above): it is settled by that one, never by this one
		// (Resolver.Charged refuses), unless the recorded one fails.
		first := *refund.StripeRefundID
		return "", s.reopenOnce(ctx, tx, refund, sr, status, fmt.Sprintf("Refund %s of refund %d's intent is %s for %d, and refund %d records Refund %s (%s for %d): "+
			"a second refund, money %s twice", sr.ID, refund.ID, sr.Status, sr.Amount, refund.ID, first,
			refund.Status, refund.Amount, moved(status)),
			fmt.Sprintf("; resolve it as refunded by %s, and deal with %s in Stripe (if both stand, the money was returned twice); "+
				"only if %s fails, resolve it as refunded by %s", first, sr.ID, first, sr.ID))
	case sr.Amount != refund.Amount:
		return "", phases.Alarm("Refund %s is for %d, refund %d for %d", sr.ID, sr.Amount, refund.ID, refund.Amount)
	case refund.StatusAt != nil && at.Before(*refund.StatusAt):
		return fmt.Sprintf("older than refund %d's status %s (of %s)", refund.ID, refund.Status, refund.StatusAt.UTC().Format(time.RFC3339)), nil
	case refund.StripeRefundID != nil && *refund.StripeRefundID == sr.ID && stage(status) < stage(refund.Status):
		// Times alone cannot order the word of the flow (a Refund read
		// at some moment after its creation) and events stamped to the
		// second; Stripe's Refund only moves forward, so an event that
		// would move this Refund back is older than what is recorded.
		return fmt.Sprintf("Refund %s is %s already; %s is an older state", sr.ID, refund.Status, status), nil
	case status == StatusFailed && refund.Status != StatusFailed && len(moneyMoved(handed, sr.ID)) > 0:
		// The refund's own Refund failed (pending or succeeded before),
		// and a second Refund of its intent, which its key was handed
		// over for, returned the money or is returning it: the operator
		// settled the key by this one, as told while it stood. Answering
		// "failed" and giving the amount back would have a client refund
		// again under a new key. The refund stays as it is, its amount
		// held, and the key is the operator's again.
		return "", s.ownFailedBesideSeconds(ctx, tx, refund, sr, moneyMoved(handed, sr.ID))
	case refund.Status == StatusFailed && status != StatusFailed:
		why := fmt.Sprintf("Refund %s is %s for refund %d, recorded failed (%s): money %s for a refund answered failed",
			sr.ID, status, refund.ID, deref(refund.FailureReason), moved(status))
		// The key answers "not refunded" no more: a client told so would
		// refund again under a new key.
		_, err := s.reopen(ctx, tx, refund, why, "; resolve it as refunded by "+sr.ID)
		return "", err
	case status == StatusPending && refund.Status == StatusSucceeded:
		return fmt.Sprintf("refund %d succeeded already", refund.ID), nil
	}
	if refund.IdempotencyKeyID != nil {
		if err := s.Engine.ClaimForEvent(ctx, tx, *refund.IdempotencyKeyID); err != nil {
			return "", err
		}
	}
	if status != refund.Status || refund.StripeRefundID == nil {
		row, err := dbsqlc.New().RefundTransition(ctx, tx, &dbsqlc.RefundTransitionParams{
			ID: refund.ID, FromStatus: refund.Status, Status: status, StripeRefundID: &sr.ID,
			FailureReason: nonEmpty(string(sr.FailureReason)), StatusAt: &at,
		})
		if err != nil {
			return "", fmt.Errorf("error moving refund %d to %s: %w", refund.ID, status, err)
		}
		refund = (*dbsqlc.Refund)(row)
	}
	if refund.IdempotencyKeyID != nil {
		if _, err := s.Engine.FinishFromOutside(ctx, tx, *refund.IdempotencyKeyID, createdResponse(refund)); err != nil {
			return "", err
		}
	}
	return "", nil
}

// moved words what a Refund of status did with the money: returned it, or
// (pending) is returning it.
func moved(status string) string {
	if status == StatusPending {
		return "being returned"
	}
	return "returned"
}

// reopen hands the key of refund, whose answer a Refund contradicts (not
// refunded, or refunded once), back to an operator, parked for a conflict,
// from its tombstone if the reaper took it, and returns the alarm to
// record. resolve tells the operator how to settle it. A key that has not
// finished is parked now (Engine.HandOver): whether a run holds it or it
// awaits an operator for another reason, it must not finish with an
// answer that leaves this Refund out. done is false when it failed, or
// when a live key holds the reaped key's idempotency key, so that a later
// event tries again.
func (s *EventSettler) reopen(ctx context.Context, tx db.Tx, refund *dbsqlc.Refund, why, resolve string) (done bool, err error) {
	if refund.IdempotencyKeyID != nil {
		if _, err := s.Engine.HandOver(ctx, tx, *refund.IdempotencyKeyID, RefundCreated, why+resolve); err != nil {
			return false, err
		}
		return true, phases.Alarm("%s", why)
	}
	keyID, restored, err := s.Engine.Restore(ctx, tx, phases.Reaped{
		ResourceType: "refund", ResourceID: refund.ID, Method: http.MethodPost, Flow: FlowName, CreatedAt: refund.CreatedAt,
	}, RefundCreated, why+"; its key was reaped and is back for an operator"+resolve)
	var inUse *phases.KeyInUseError
	switch {
	case errors.As(err, &inUse):
		return false, phases.Alarm("%s; its key was reaped, and key %d holds its idempotency key now: not brought back, "+
			"its tombstone kept (docs/operations.md)", why, inUse.KeyID)
	case err != nil:
		return false, err
	case !restored:
		return true, phases.Alarm("%s; its key was reaped and its tombstone is gone too: no key to resolve (docs/operations.md)", why)
	}
	if _, err := dbsqlc.New().RefundLinkRestoredKey(ctx, tx, &dbsqlc.RefundLinkRestoredKeyParams{ID: refund.ID, IdempotencyKeyID: &keyID}); err != nil {
		return false, fmt.Errorf("error linking refund %d to its restored key: %w", refund.ID, err)
	}
	return true, phases.Alarm("%s; its reaped key %d is back for an operator", why, keyID)
}

// stage orders a refund's statuses as Stripe moves a Refund: pending
// (requires_action included) first, then succeeded, then failed, which
// a succeeded Refund may still become, and which nothing leaves.
func stage(status string) int {
	switch status {
	case StatusSucceeded:
		return 1
	case StatusFailed:
		return 2
	}
	return 0
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
