// Package refunds is the refund flow: the second idempotent endpoint, on the
// same engine and the same exactly-once rules as payments (package
// stripeonce), and the first that acts on a resource many keys share.
//
// Refunds of one payment are decided in the flow's first transaction under
// the payment's row lock, counting every refund that has not failed (those
// still in flight included), so concurrent refunds under different keys
// can never total more than the payment, and Stripe is never asked for
// more. Lock order: a refund row before its key and its payment.
// Webhooks lock the refund an event is about, the record step locks it
// before its key's lease (Run.Checkpoint runs its function first), and the
// operator's keys resolve locks it before the key (SettleAfter with
// lockRefundOfKey), reading the Refund it is given at Stripe under that
// lock. Two of them meeting on one refund wait for each other; they do not
// deadlock. The first transaction locks the payment and inserts the refund,
// which no other transaction sees before it commits.
//
//	started ──► refund_created ──► finished
//	 local tx: lock the payment,   Stripe call, then tx: record the
//	 decide, insert the refund     refund's status, move amount_refunded
package refunds
