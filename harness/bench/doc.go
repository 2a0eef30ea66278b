// Package bench is paymentsd's load generator and report writer, the engine
// of `make bench` (scripts/bench.sh starts Postgres, the service, the bare
// service and the Stripe emulator, then runs harness/cmd/paymentsd-bench).
//
// The service is read against the bare service (package bare,
// harness/cmd/paymentsd-bare): the same two commits and the same stripe-go
// call to the same emulator, and nothing else, measured in the same run with
// the same load generator on the same cluster. At each connection count it
// measures, in this order:
//
//   - the bare service's fresh payments: closed-loop clients POST /payments
//     with unique Idempotency-Keys, spread over several users;
//   - the emulator alone: the same clients POST /v1/payment_intents to the
//     Stripe emulator directly, the share of a fresh payment that is not ours;
//   - the service's fresh payments, the same requests under keys of its own;
//   - the fresh-payment ceiling: pgbench running
//     harness/bench/pgbench/fresh.sql, the bare service's two transactions
//     with nothing around them;
//   - the service's replays, then the bare service's: the same POST with
//     keys each finished beforehand, answered from the stored response;
//   - the replay ceiling: pgbench running harness/bench/pgbench/replay.sql,
//     the one indexed lookup a replay needs.
//
// With a second bare service over the least SQL that does the job
// (Config.LeastURL, paymentsd-bare -sql least), the design's yardstick, the
// point also measures least.sql right after fresh.sql, that bare service's
// fresh payments and replays as a third side of the judged rounds, and
// least_replay.sql after replay.sql (least.go); and what each fresh payment
// made the database write, for the service and for the least SQL
// (evidence.go).
//
// At TargetConns, where the targets are judged, each judged pair runs
// JudgedRuns times, in ABBA order over and over (judged.go): after the
// fresh-payment ceiling the fresh pair JudgedRuns-1 times more, the service
// first in every other one, and the replays as service, bare, bare,
// service, and so on. Each side's runs are read as one Load (combine): the
// requests answered inside all its windows over the sum of the windows, p50
// and p99 over all its runs' latencies together, the counts summed, and
// each run's own throughput kept in Load.Runs for the report. The filled
// point's pairs run so too; every other connection count and the
// slow-processor point run each side once.
//
// Then one slow-processor point: the emulator answers every create after a
// fixed latency while the service, then the bare service, keep payments in
// flight; then the same with many more in flight (many.go), read against
// the lesser of Little's bound and the SQL ceiling. The targets (targets.go) are ratios to the bare service; the
// shares of the pgbench ceilings are reported beside them. With a Profiler,
// the service runs fresh payments and replays once more at TargetConns, in
// runs of their own that the targets do not read, while it is profiled, and
// with a BareProfiler the bare service's own runs of the same scenarios
// (profiledRuns): the report reads the service's CPU and allocations per request against
// the bare's, the CPU by bucket of where it goes (profile_compare.go).
//
// # Commits per payment
//
// The service's fresh run (at TargetConns, the first of its two) is
// bracketed by two readings of pg_stat_database.xact_commit for the bench
// database and of the cluster's next transaction id. Postgres flushes a
// backend's counters at most once a second and, once the backend goes idle,
// only after up to ten seconds, so each reading is taken after the database
// has been idle that long (Settle); that is why the bare service's fresh run
// comes first, with the emulator's run filling the wait. The run's readings
// minus the background rate measured over an idle interval at the start,
// divided by the payments created (warm-up included), give two figures:
// transactions (xact_commit counts every statement run outside a
// transaction block as a committed transaction, writes or not) and writing
// transactions (those that were assigned a transaction id, which are the
// ones that flush the WAL). The bare service's writing transactions are
// read from the WAL alone, at once before and after its (first) run: it has
// no background work to wait for.
//
// # Flat as it grows
//
// `make bench-fill` measures the point at TargetConns again once the
// database holds ten million finished keys and everything the service
// leaves behind them (Fill, fill.go): fresh payments under random keys,
// replays of filled keys spread over the whole index, the service's reaper
// around those runs and the size of every table and index after; the
// service must keep 90% of its empty-database throughput and its reaper
// must keep up. See filled.go for how the runs are split around the fill.
package bench
