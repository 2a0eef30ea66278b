package chaos

import (
	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
)

// An asynchronous failover loses payments whose PaymentIntents succeeded at
// Stripe, or were authorized (manual payments), and refunds whose Refunds
// succeeded or are pending. Until a reconciling client sends their keys
// again, which re-adopts each PaymentIntent and Refund, the
// payment_intent.succeeded (or amount_capturable_updated) event of one
// finds no payment recording it, the refund.created or refund.updated of
// one no refund, and the service rightly raises an alarm ("a second
// charge, or one whose payment was lost"; "a second authorization …";
// "money returned for a refund that was lost") instead of applying it.
// Check 9 counts such an alarm as explained, not as a violation, when the
// run's failover was asynchronous and a payment records that
// PaymentIntent, or a refund that Refund, at the verdict: the lost row was
// re-adopted, and checks 3 and 6 prove nothing was charged or refunded
// twice. Any other alarm stays a violation.

// alarmedByFailover reports whether the stripe_events row of event e is an
// alarm that an asynchronous failover explains.
func alarmedByFailover(e stripefake.Event, row *EventRow, rec *Recovery) bool {
	return rec != nil && rec.Mode.Async() && rec.Failover.Done() && row.Outcome == "alarm" &&
		movesMoney(e.Type) && rec.Recorded[e.ObjectID]
}

// movesMoney reports whether an event of type eventType may say its object
// moved money: a PaymentIntent that took the customer's money or holds it,
// or a Refund that returned it or is returning it. These are the events
// whose object no payment or refund records the service keeps as alarms.
func movesMoney(eventType string) bool {
	switch eventType {
	case "payment_intent.succeeded", "payment_intent.amount_capturable_updated",
		"refund.created", "refund.updated", "charge.refund.updated":
		return true
	}
	return false
}

// recordedObjects are the PaymentIntents the payments of snap record and
// the Refunds its refunds record.
func recordedObjects(snap *Snapshot) map[string]bool {
	out := map[string]bool{}
	for _, pays := range snap.PaymentsOf {
		for _, p := range pays {
			if p.PaymentIntentID != nil {
				out[*p.PaymentIntentID] = true
			}
		}
	}
	for _, r := range snap.Refunds {
		if r.StripeRefundID != nil {
			out[*r.StripeRefundID] = true
		}
	}
	return out
}

// lostObjects are the PaymentIntents and Refunds the lost-history faults
// left without their payment or refund: the lost payments' PaymentIntents,
// and every Refund at Stripe of the intent of a lost refund key.
func lostObjects(faults []*LostHistory, snap *Snapshot) map[string]bool {
	out := map[string]bool{}
	refunds := map[string][]string{} // Refund ids per intent
	for _, r := range snap.StripeRefunds {
		id := r.Metadata[intent.MetadataIntent]
		refunds[id] = append(refunds[id], r.ID)
	}
	for _, f := range faults {
		if f.PaymentIntent != "" {
			out[f.PaymentIntent] = true
		}
		for _, in := range append([]*Intent{f.Victim}, f.Refunds...) {
			if !in.Refund {
				continue
			}
			for _, id := range refunds[snap.intentID(in)] {
				out[id] = true
			}
		}
	}
	return out
}
