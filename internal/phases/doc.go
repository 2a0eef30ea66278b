// Package phases is the atomic-phase engine: it drives one idempotency key
// through a flow of steps, each step one Postgres transaction with at most one
// foreign side effect, recording a recovery point as it goes so that any later
// run — the client's retry, or the completer with no client at all — resumes
// exactly where the last one stopped.
//
// The engine knows nothing about payments. A flow is a map from recovery
// point to Step; a new idempotent endpoint (refunds, say) is a new flow and
// its queries, not a new engine.
//
// # Leases and fencing
//
// A run owns a key through a lease: a random token written into the key row
// together with locked_at. The lease is taken atomically, by the INSERT that
// creates the key or by a conditional UPDATE that only succeeds when the lease
// is free or stale. Every later write of the run carries "WHERE lock_token =
// <token>", so a run whose lease was taken over by a newer one cannot write:
// its transaction rolls back and it stops with ErrLeaseLost.
//
// # Commits
//
// Steps without a foreign call run in the transaction that is already open, so
// a fresh request costs two commits for the payment flow: the reservation
// fused with the local work before the Stripe call, and the record of the
// call fused with the finish. No transaction is ever held open across a
// foreign call.
//
// # Isolation
//
// Transactions run at READ COMMITTED. Every decision that two runs could race
// on is one statement with its predicate in the WHERE clause (the insert that
// creates the key, the update that takes a lease, the fenced updates), which
// Postgres re-checks against the newest row version, so runs on distinct keys
// never conflict and runs on one key serialize on its row.
package phases
