// Package payments is the payment flow run by the phase engine: create a
// payment, charge it through Stripe, finish with a stored response.
//
//	started ──► payment_created ──► charge_created ──► finished
//	         local tx            Stripe call, then    local tx: audit,
//	         payment + audit     tx: record the PI    stored response
//
// The engine fuses the reservation with the first step and the record of the
// Stripe call with the finish, so a fresh payment costs two commits, and
// inserts the key at payment_created, where the first one leaves it: the
// key is written twice, by its insert and by its finish.
//
// The Stripe call follows package stripeonce: intent-derived keys (package
// intent), spent attempts, a consistent lookup, the visibility margin and the
// send cut-off; an outcome no rule can settle parks the key for an operator
// (Resolver) or for Stripe's own word (EventSettler, from a webhook).
package payments
