// Package captures is the second half of "authorize now, capture later":
// POST /payments/{id}/capture and POST /payments/{id}/cancel, two flows on
// the phase engine that change a PaymentIntent which exists, where refunds
// create one.
//
// Both are decided in the flow's first transaction under the payment's row
// lock, and the key that is let through claims the payment
// (payments.capture_key_id): a second key, a capture racing a cancel,
// finds it claimed and gets a stored 400, so one payment reaches Stripe
// under one client key. The one Stripe call goes out under a key derived
// from the client's intent (package intent); after an ambiguous answer the
// truth is the PaymentIntent's own state, read back by a retrieve (strongly
// consistent): succeeded is captured, canceled is canceled, and
// requires_capture means the key did nothing, so the next run moves to the
// next Stripe key (a replayed 500 would answer the old one for ever). Two
// captures of one authorization can never both take: Stripe moves it out
// of requires_capture once, so even a capture still executing under an old
// key and one under the new key capture once between them.
//
//	started ──► capture_claimed ──► finished
//	 local tx: lock the payment,   Stripe capture (or cancel), read back
//	 decide, claim it for the key  when ambiguous; tx: record, receipt
//
// Lock order is the webhook's: the payment row, then a key row (an event
// finds the payment, then claims the key that claimed it). The run's
// checkpoint for its next Stripe key and the operator's keys resolve take
// the payment first too (phases.Run.Checkpoint, phases.Engine.SettleAfter),
// and the record step writes the payment before its fence writes the key.
// Only the decision locks a key row first: the one it inserts, which no
// other transaction can see, let alone wait for, before it commits. A run
// resuming a key locks nothing but its key row while it takes the lease.
package captures
