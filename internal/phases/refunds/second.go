package refunds

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// reopenOnce hands refund's key to the operator, as reopen does, for a
// second Refund sr of its intent (status is sr's: pending or succeeded),
// unless the key was handed over for sr already and sr did nothing new
// since: refund.second_refunds records, by Refund, its status then and
// whether the refund was recorded failed. Another event of the same change
// (charge.refund.updated beside refund.updated, a redelivery under another
// id) or an older one only alarms, so an operator's settling sticks. A
// pending Refund that then succeeds returned the money it was returning,
// and a refund recorded failed since answers "failed" while sr returns the
// money: the key is handed over again. What the refund records otherwise
// (its own Refund succeeding, say) is not news about sr, nor is an event of
// sr older than its failure (recordSecondFailed).
func (s *EventSettler) reopenOnce(ctx context.Context, tx db.Tx, refund *dbsqlc.Refund, sr *stripe.Refund, status, why, resolve string) error {
	handed, err := secondRefundsOf(refund)
	if err != nil {
		return err
	}
	now := handedOver{Status: status, RefundFailed: refund.Status == StatusFailed}
	before, seen := handed[sr.ID]
	if seen && before.Status == StatusFailed {
		// Failed is final: this event is older than that failure.
		return phases.Alarm("%s; Refund %s failed since (recorded): not reopened", why, sr.ID)
	}
	if seen && !now.newsSince(before) {
		return phases.Alarm("%s; the key was handed to the operator for Refund %s %s already: not reopened", why, sr.ID, before)
	}
	if stage(before.Status) > stage(now.Status) {
		now.Status = before.Status
	}
	done, err := s.reopen(ctx, tx, refund, why, resolve)
	if !done {
		return err
	}
	if rerr := dbsqlc.New().RefundRecordSecondRefund(ctx, tx, &dbsqlc.RefundRecordSecondRefundParams{
		ID: refund.ID, StripeRefundID: sr.ID, Status: now.Status, RefundFailed: now.RefundFailed,
	}); rerr != nil {
		return fmt.Errorf("error recording Refund %s on refund %d: %w", sr.ID, refund.ID, rerr)
	}
	return err
}

// handedOver is what a second Refund of a refund's intent had done when
// the refund's key was handed to the operator for it, as
// refunds.second_refunds keeps it by Refund.
type handedOver struct {
	// Status is the Refund's: pending (returning the money) or succeeded
	// (returned it); failed once its failure came (recordSecondFailed).
	Status string `json:"status"`
	// RefundFailed says the refund was recorded failed: its key answered
	// "not refunded", not "refunded once".
	RefundFailed bool `json:"refund_failed"`
}

// newsSince says whether h tells the operator more than before did: the
// Refund moved on (pending to succeeded), or the refund was recorded
// failed since (or no longer is). An older status says nothing new.
func (h handedOver) newsSince(before handedOver) bool {
	return h.RefundFailed != before.RefundFailed || stage(h.Status) > stage(before.Status)
}

func (h handedOver) String() string {
	if h.RefundFailed {
		return "when it was " + h.Status + " and the refund was recorded failed"
	}
	return "when it was " + h.Status
}

// secondRefundsOf reads refund.second_refunds.
func secondRefundsOf(refund *dbsqlc.Refund) (map[string]handedOver, error) {
	handed := map[string]handedOver{}
	if len(refund.SecondRefunds) == 0 {
		return handed, nil
	}
	if err := json.Unmarshal(refund.SecondRefunds, &handed); err != nil {
		return nil, fmt.Errorf("error decoding the second Refunds of refund %d: %w", refund.ID, err)
	}
	return handed, nil
}

// recordSecondFailed records in refund.second_refunds that sr, a second
// Refund of its intent (the refund records another), failed: it returned
// nothing, and the refund's own Refund failing later is no reason to hand
// the key over again (moneyMoved leaves it out). It is recorded whether or
// not the key was ever handed over for sr.
func recordSecondFailed(ctx context.Context, tx db.Tx, refund *dbsqlc.Refund, sr *stripe.Refund, handed map[string]handedOver) error {
	before, seen := handed[sr.ID]
	if seen && before.Status == StatusFailed {
		return nil
	}
	refundFailed := before.RefundFailed
	if !seen {
		refundFailed = refund.Status == StatusFailed
	}
	if err := dbsqlc.New().RefundRecordSecondRefund(ctx, tx, &dbsqlc.RefundRecordSecondRefundParams{
		ID: refund.ID, StripeRefundID: sr.ID, Status: StatusFailed, RefundFailed: refundFailed,
	}); err != nil {
		return fmt.Errorf("error recording Refund %s failed on refund %d: %w", sr.ID, refund.ID, err)
	}
	return nil
}

// moneyMoved lists, sorted, the second Refunds of handed, other than
// except, that returned the money or were returning it when the key was
// handed over for them (and are not known to have failed since), each as
// "re_… (status)".
func moneyMoved(handed map[string]handedOver, except string) []string {
	var ids []string
	for id, h := range handed {
		if id != except && h.Status != StatusFailed {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for i, id := range ids {
		ids[i] = id + " (" + handed[id].Status + ")"
	}
	return ids
}

// ownFailedBesideSeconds hands refund's key back to the operator when the
// refund's own Refund sr failed while the second Refunds seconds (from
// moneyMoved) returned, or were returning, the money, and changes nothing
// of the refund: its status keeps its amount held. A key parked for a
// conflict already is the operator's: ClaimForEvent's alarm says so.
func (s *EventSettler) ownFailedBesideSeconds(ctx context.Context, tx db.Tx, refund *dbsqlc.Refund, sr *stripe.Refund, seconds []string) error {
	if refund.IdempotencyKeyID != nil {
		if err := s.Engine.ClaimForEvent(ctx, tx, *refund.IdempotencyKeyID); err != nil {
			return err
		}
	}
	list := strings.Join(seconds, ", ")
	why := fmt.Sprintf("Refund %s of refund %d failed (%s), and its key was handed over for Refund %s of its intent, "+
		"which returned the money or was returning it: refund %d stays %s, its %d held, not answered failed",
		sr.ID, refund.ID, sr.FailureReason, list, refund.ID, refund.Status, refund.Amount)
	_, err := s.reopen(ctx, tx, refund, why, fmt.Sprintf("; resolve it as refunded by %s if it stands "+
		"(if more than one stands, the money was returned more than once), as not refunded if it failed too", list))
	return err
}
