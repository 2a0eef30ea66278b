// Package refunds is the refund flow: the second idempotent endpoint, on the
// same engine and the same exactly-once rules as payments (package
// stripeonce), and the first that acts on a resource many keys share.
//
// Refunds of one payment are decided in the flow's first transaction under
// the payment's row lock, counting every refund that has not failed (those
// still in flight included), so concurrent refunds under different keys
// can never total more than the payment, and Stripe is never asked for
// more. Lock order: the payment row, then its refund rows, then a key row,
// as webhooks take them (they lock the row an event is about, then its
// key) and Run.Checkpoint does (its function before the lease). A key's
// first transaction locks the key row it inserts first, but no other
// transaction can see that row before it commits. One path still locks a
// refund key first: the operator's keys resolve (Engine.Settle; refunds
// have no locking read of their row by key to hand SettleAfter yet). A
// refund event meeting it can deadlock; Postgres aborts one of the two
// after deadlock_timeout, and db.WithTx retries it.
//
//	started ──► refund_created ──► finished
//	 local tx: lock the payment,   Stripe call, then tx: record the
//	 decide, insert the refund     refund's status, move amount_refunded
package refunds
