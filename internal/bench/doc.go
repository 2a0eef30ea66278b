// Package bench is paymentsd's load generator and report writer, the engine
// of `make bench` (scripts/bench.sh starts Postgres, the service and the
// Stripe emulator, then runs cmd/paymentsd-bench).
//
// At each connection count it measures, in this order:
//
//   - fresh payments: closed-loop clients POST /payments with unique
//     Idempotency-Keys, spread over several users;
//   - the emulator alone: the same clients POST /v1/payment_intents to the
//     Stripe emulator directly, the share of a fresh payment that is not ours;
//   - the fresh-payment ceiling: pgbench running bench/pgbench/fresh.sql, the
//     service's own two transactions with nothing around them;
//   - replays: the same POST with keys finished beforehand, answered from the
//     stored response;
//   - the replay ceiling: pgbench running bench/pgbench/replay.sql, the one
//     indexed lookup a replay needs.
//
// Every service figure is reported as a ratio to the ceiling measured next
// to it, in the same run and on the same cluster, because on a shared
// two-core machine absolute numbers drift while ratios hold.
//
// # Commits per payment
//
// A fresh run is bracketed by two readings of pg_stat_database.xact_commit
// for the bench database and of the cluster's next transaction id. Postgres
// flushes a backend's counters at most once a second and, once the backend
// goes idle, only after up to ten seconds, so each reading is taken after
// the service has been idle that long (Settle). The run's readings minus the
// background rate measured over an idle interval at the start, divided by
// the payments created (warm-up included), give two figures: transactions
// (xact_commit counts every statement run outside a transaction block as a
// committed transaction, writes or not) and writing transactions (those that
// were assigned a transaction id, which are the ones that flush the WAL).
package bench
