// Package webhooks applies Stripe's events: verified with stripe-go's own
// webhook package, recorded once per event id, applied in the transaction
// that records them, and never allowed to move a state back.
//
// Stripe delivers events late, more than once and in any order. So:
//   - an event id takes effect once: its row is inserted ON CONFLICT DO
//     NOTHING, and a concurrent delivery of the same event waits for the
//     first and then finds it there;
//   - the event row and its effects commit together;
//   - ordering is decided per object, never by arrival: a PaymentIntent
//     event only settles a payment still pending (its outcomes are final),
//     a refund's status only moves forward (pending, then succeeded or
//     failed; succeeded may still fail) and never to an older event's
//     status than the one applied (refunds.status_at), and a dispute marks
//     its payment once;
//   - an event for an object unknown here, or another deployment's, or one
//     that would move a state back, is recorded as ignored with its reason:
//     answered 200 (Stripe must stop retrying), never lost silently.
//
// Of the authorities on an unknown outcome, the webhook comes first: it
// settles a payment whose charge answer was lost, or whose key awaits an
// operator, without any call to Stripe.
package webhooks
