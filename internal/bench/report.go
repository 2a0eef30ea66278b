package bench

import (
	"fmt"
	"strings"
)

// Markdown renders BENCHMARKS.md. svgPath is the plot's path relative to
// the report.
func Markdown(r *Results, svgPath string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	w("# Benchmarks\n\n")
	w("Throughput and latency of `POST /payments` — fresh payments and replays — each set against the SQL\n")
	w("ceiling of the same work measured with pgbench in the same run, on the same Postgres cluster\n")
	w("(design.md §5). Written by `make bench` (scripts/bench.sh, cmd/paymentsd-bench); do not edit by hand.\n\n")
	w("- **Date:** %s (UTC), %s of measurement\n", r.Started.Format("2006-01-02 15:04"), r.Finished.Sub(r.Started).Round(1e9))
	w("- **Command:** `%s`\n", r.Command)
	w("- **Each run:** %s measured after a %s warm-up (HTTP); pgbench `-M prepared -n -T %d -j 2`; connections %s\n",
		r.Duration.Duration(), r.Warmup.Duration(), max(1, int(float64(r.Duration)+0.999)), connList(r))
	w("- **Load:** %d users; replays cycle over %d finished keys per user\n\n", r.Users, r.ReplayKeys)

	w("## Results\n\n%s\n", Tables(r))
	w("![Throughput and p99 latency against connections: the service beside its SQL ceiling](%s)\n\n", svgPath)

	w("## Machine\n\n| | |\n|---|---|\n")
	m := r.Machine
	for _, row := range [][2]string{
		{"CPUs (`nproc`)", fmt.Sprint(m.CPUs)}, {"CPU", m.CPUModel}, {"memory", m.Memory}, {"kernel", m.Kernel},
		{"Postgres", m.PostgresVersion}, {"fsync / synchronous_commit", m.Fsync + " / " + m.SynchronousCommit},
		{"shared_buffers", m.SharedBuffers}, {"shared_preload_libraries", orDash(m.PreloadLibraries)},
		{"pgbench", m.PgbenchVersion}, {"Go", m.GoVersion},
		{"BENCH_DURATION", r.Duration.Duration().String()},
	} {
		w("| %s | %s |\n", row[0], row[1])
	}
	w("\nThe load generator, the service, the Stripe emulator, pgbench and Postgres share these cores, and\n")
	w("other work on the machine was not stopped for the run: absolute figures are noisy, which is why every\n")
	w("service figure is read against a ceiling measured minutes apart from it at most.\n\n")

	commitSection(&b, r)
	statementSection(&b, r)

	w("## Method\n\n")
	w("- **Clients** are closed-loop: each of *conns* clients sends its next request when the previous\n")
	w("  answer has been read whole, over keep-alive HTTP/1.1. A request counts when its answer arrives\n")
	w("  inside the window; p50/p99 are over the successful ones. Fresh payments use a new\n")
	w("  Idempotency-Key per request and client *i* sends as user *i* mod %d; replays cycle over the\n", r.Users)
	w("  finished keys and must answer 201 with `Idempotent-Replayed: true` (anything else is an error).\n")
	w("- **Emulator alone** posts the same charge (`amount=2000&currency=usd&payment_method=pm_card_visa&confirm=true`,\n")
	w("  `Authorization: Bearer sk_test_x`, a new Idempotency-Key each, as the service sends) straight to the\n")
	w("  emulator's `/v1/payment_intents`: the part of a fresh payment that is not ours.\n")
	w("- **Ceilings:** `bench/pgbench/fresh.sql` is the service's two transactions of a fresh payment,\n")
	w("  statement for statement, and nothing else (one script = one payment, so its tps is payments/s);\n")
	w("  `bench/pgbench/replay.sql` is the one indexed lookup of a finished key by (user, key).\n")
	w("- **Order at each connection count:** fresh payments, emulator alone, fresh.sql, replays, replay.sql.\n")
	w("- **Targets** are judged at %d connections for the ratios and the p99, at every connection count\n", TargetConns)
	w("  for 409s and errors, and over every fresh run for the commits.\n")
	return b.String()
}

// commitSection explains the commit figures.
func commitSection(b *strings.Builder, r *Results) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	phases, writing, xact, source, _ := commitTotals(r.Points)
	w("## Commits per fresh payment\n\n")
	w("Each fresh run is bracketed by two readings — `pg_stat_database.xact_commit` of the bench database,\n")
	w("the WAL position and the cluster's next transaction id — taken once the service has been idle for\n")
	w("11 s, because Postgres publishes an idle backend's counters up to 10 s late. The background measured\n")
	w("over %.1f s of idleness before the first run is subtracted (%.2f transactions/s, %.2f writing and\n",
		r.Noise.Seconds, r.Noise.XactPerSec, r.Noise.WritesPerSec)
	w("%.2f phase commits/s in the bench database; %.2f transaction ids/s in the cluster), and the rest is\n",
		r.Noise.PhaseWritesPerSec, r.Noise.XidPerSec)
	w("divided by the payments created in the run, warm-up included. Over every fresh run:\n\n")
	if phases >= 0 {
		w("- **Phase commits / payment: %.2f** — what the 2-commit target counts: the transactions that\n", phases)
		w("  wrote the `idempotency_keys` table. Every phase commit writes the key row (its recovery point, its\n")
		w("  lease), and during the run nothing else does (the completer and the reaper only touch stalled or\n")
		w("  expired keys), so these are the commits a request waits for.\n")
		w("- **Writing transactions / payment: %.2f** — every transaction that wrote to the bench database:\n", writing)
		w("  the phase commits plus the service's background work for each payment (the outbox job's fetch\n")
		w("  and completion, the receipt). Both come from pg_walinspect: the distinct transaction ids of the\n")
		w("  WAL records that touch the bench database's relations, so nothing in other databases counts.\n")
	} else {
		w("- **Writing transactions / payment: %.2f** (%s) — what the 2-commit target is judged on here,\n", writing, sourceName(source))
		w("  background work included. pg_walinspect was not usable (%s), so the phase commits could not\n", r.WALInspect)
		w("  be told apart, and the cluster's transaction ids (marked †) count anything else writing to the server.\n")
	}
	w("- **xact_commit / payment: %.2f** — every transaction Postgres committed in the bench database,\n", xact)
	w("  including each statement run outside a transaction block (the key lookup before reserving, say),\n")
	w("  which it counts as a transaction of its own although it writes nothing.\n")
	var cal []string
	for _, p := range r.Points {
		if c := p.FreshCeiling; c.XactPerScript > 0 {
			s := fmt.Sprintf("%.2f", c.XactPerScript)
			if c.WritesPerScript > 0 {
				s += fmt.Sprintf(" / %.2f", c.WritesPerScript)
			}
			cal = append(cal, s+fmt.Sprintf(" at %d", p.Conns))
		}
	}
	if len(cal) > 0 {
		w("- **Calibration:** the same accounting over the fresh.sql runs, whose scripts commit exactly two\n")
		w("  writing transactions, gives xact_commit / writing transactions per script of %s\n", strings.Join(cal, ", "))
		w("  (xact_commit also counts each pgbench connection's statement preparation).\n")
	}
	if r.StatStatements == "enabled" {
		var parts []string
		for _, p := range r.Points {
			parts = append(parts, fmt.Sprintf("%.2f at %d", p.Commits.CommitStatements, p.Conns))
		}
		w("- **COMMIT statements / payment** (pg_stat_statements): %s.\n", strings.Join(parts, ", "))
	}
	w("\n")
}

// statementSection lists where the database time went, or why it cannot.
func statementSection(b *strings.Builder, r *Results) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Where the database time goes\n\n")
	if r.StatStatements != "enabled" {
		w("pg_stat_statements was not used: %s. Start the server with\n", r.StatStatements)
		w("`-c shared_preload_libraries=pg_stat_statements` to get the service's heaviest statements here.\n\n")
		return
	}
	for _, kind := range []string{"fresh", "replay"} {
		w("Heaviest statements during the %s runs (all connection counts; calls per request):\n\n", kind)
		w("| statement | calls / request | mean ms | share of time |\n|---|--:|--:|--:|\n")
		for _, s := range r.Top[kind] {
			w("| `%s` | %.2f | %.3f | %.0f%% |\n", strings.ReplaceAll(s.Query, "|", "\\|"), s.PerRequest, s.MeanMs, 100*s.ShareOfTime)
		}
		w("\n")
	}
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func connList(r *Results) string {
	parts := make([]string, len(r.Points))
	for i, p := range r.Points {
		parts[i] = fmt.Sprint(p.Conns)
	}
	return strings.Join(parts, ", ")
}
