// Package refunds is the refund flow: the second idempotent endpoint, on the
// same engine and the same exactly-once rules as payments (package
// stripeonce), and the first that acts on a resource many keys share.
//
// Refunds of one payment are decided in the flow's first transaction under
// the payment's row lock, counting every refund that has not failed (those
// still in flight included), so concurrent refunds under different keys
// can never total more than the payment, and Stripe is never asked for
// more. Lock order, everywhere: a key row (only its own run ever locks it),
// then the payment row, then its refund rows.
//
//	started ──► refund_created ──► finished
//	 local tx: lock the payment,   Stripe call, then tx: record the
//	 decide, insert the refund     refund's status, move amount_refunded
package refunds
