package chaos

import (
	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// An asynchronous failover loses payments whose PaymentIntents succeeded at
// Stripe, or were authorized (manual payments). Until a reconciling client
// sends their keys again, which re-adopts each PaymentIntent, the
// payment_intent.succeeded (or amount_capturable_updated) event of one
// finds no payment recording it, and the service rightly raises an alarm
// ("a second charge, or one whose payment was lost"; "a second
// authorization …") instead of applying it. Check 9 counts such an alarm as explained, not as a violation, when
// the run's failover was asynchronous and a payment records that
// PaymentIntent at the verdict: the lost payment was re-adopted, and check 3
// proves no payment has two succeeded PaymentIntents. Any other alarm stays
// a violation.

// alarmedByFailover reports whether the stripe_events row of event e is an
// alarm that an asynchronous failover explains.
func alarmedByFailover(e stripefake.Event, row *EventRow, rec *Recovery) bool {
	return rec != nil && rec.Mode.Async() && rec.Failover.Done() && row.Outcome == "alarm" &&
		holdsFunds(e.Type) && rec.Recorded[e.ObjectID]
}

// holdsFunds reports whether an event of type eventType says its
// PaymentIntent took the customer's money or holds it: the events whose
// PaymentIntent no payment records the service keeps as alarms.
func holdsFunds(eventType string) bool {
	return eventType == "payment_intent.succeeded" || eventType == "payment_intent.amount_capturable_updated"
}

// recordedIntents are the PaymentIntents the payments of snap record.
func recordedIntents(snap *Snapshot) map[string]bool {
	out := map[string]bool{}
	for _, pays := range snap.PaymentsOf {
		for _, p := range pays {
			if p.PaymentIntentID != nil {
				out[*p.PaymentIntentID] = true
			}
		}
	}
	return out
}
