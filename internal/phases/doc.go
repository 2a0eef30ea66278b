// Package phases is the atomic-phase engine: it drives one idempotency key
// through a flow of steps, each step one Postgres transaction with at most one
// foreign side effect, recording a recovery point as it goes so that any later
// run — the client's retry, or the completer with no client at all — resumes
// exactly where the last one stopped.
//
// The engine knows nothing about payments. A Flow is a stable name (stored
// on every key it drives) and its steps in the order they run, each named by
// the recovery point the key stands at when it runs, and built with Local (work in the phase
// transaction) or Foreign (one foreign call with no transaction open, its
// typed result recorded in the next one). What the steps of one run hand
// each other is the flow's own state type, which Load rebuilds for a run
// that resumes a key. A new idempotent endpoint is a new flow and its
// queries, not a new engine: payments and refunds are two flows on this one.
//
// Besides driving keys, the engine offers a flow what exactly-once needs
// across runs: Run.Checkpoint (record how far a long call got, fenced by
// the lease), Run.Now (the database's clock, so deadlines never depend on
// this host's), NeedsAttention (park a key no machine can settle), Settle
// (an operator's settlement of a parked key) and FinishFromOutside (the
// remote party's own word, a webhook, finishing a key).
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
// A new key is inserted at the recovery point its first transaction
// reaches when its first local steps go on (for the payment flow,
// payment_created), not at started and then advanced: the steps' rows
// commit with the key or not at all. Only a transaction that ends elsewhere
// (a step finishes the key) writes the key again before it commits.
//
// # Isolation
//
// Transactions run at READ COMMITTED. Every decision that two runs could race
// on is one statement with its predicate in the WHERE clause (the insert that
// creates the key, the update that takes a lease, the fenced updates), which
// Postgres re-checks against the newest row version, so runs on distinct keys
// never conflict and runs on one key serialize on its row.
package phases
