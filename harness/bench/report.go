package bench

import (
	"cmp"
	"fmt"
	"strings"
)

// Summary renders BENCHMARKS.md: the targets, the plot and the method, with
// a link to the full report (Markdown) at reportPath; both paths are
// relative to BENCHMARKS.md.
func Summary(r *Results, svgPath, reportPath string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	header(&b, r)
	w("## Targets\n\n%s\n", targetsTable(r))
	b.WriteString(evidenceSummary(r))
	w("![Throughput and p99 latency against connections: the service beside the bare service and the SQL ceiling](%s)\n\n", svgPath)
	w("Every figure behind these, for every connection count (fresh payments, replays, commits, where the\n")
	w("service's time and the database's time go, the machine), is in the full report of the same run:\n")
	w("[%s](%s).\n\n", reportPath, reportPath)
	method(&b, r)
	return b.String()
}

// header is the reports' title, what they measure and the run's facts.
func header(b *strings.Builder, r *Results) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("# Benchmarks\n\n")
	w("Throughput and latency of `POST /payments`, fresh payments and replays, read against the **bare service**\n")
	w("(`harness/cmd/paymentsd-bare`, `harness/bench/bare`): the same two commits, the same stripe-go call to the same\n")
	w("Stripe emulator, and nothing else, measured in the same run with the same load generator, emulator and\n")
	w("Postgres cluster. The SQL ceilings of the same work, pgbench running `harness/bench/pgbench/fresh.sql` and\n")
	w("`replay.sql`, are shown beside both. That yardstick reads the engine's cost; the design's cost is read against\n")
	w("a second one in the same run, a bare service over **the least SQL that does the job** (`paymentsd-bare -sql\n")
	w("least`, `harness/bench/least`: Brandur's shape, five indexes, a schema of its own that the service never\n")
	w("uses) and its ceilings, `least.sql` and `least_replay.sql`. Written by `make bench` (scripts/bench.sh, harness/cmd/paymentsd-bench;\n")
	w("the committed copy by `make bench BENCH_WRITE=1`); do not edit by hand.\n\n")
	w("- **Date:** %s (UTC), %s of measurement\n", r.Started.Format("2006-01-02 15:04"), r.Finished.Sub(r.Started).Round(1e9))
	w("- **Command:** `%s`\n", r.Command)
	if r.Code != "" {
		w("- **Code:** %s\n", r.Code)
	}
	w("- **Each run:** %s measured after a %s warm-up (HTTP); pgbench `-M prepared -n -T %d -j 2`; connections %s\n",
		r.Duration.Duration(), r.Warmup.Duration(), max(1, int(float64(r.Duration)+0.999)), connList(r))
	w("- **Load:** %d users; replays cycle over %d finished keys per user\n\n", r.Users, r.ReplayKeys)

}

// Markdown renders the full report, docs/bench-report.md. svgPath is the
// plot's path relative to the report.
func Markdown(r *Results, svgPath string) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }

	header(&b, r)
	w("## Results\n\n%s\n", Tables(r))
	w("![Throughput and p99 latency against connections: the service beside the bare service and the SQL ceiling](%s)\n\n", svgPath)
	fillSection(&b, r)

	w("## Machine\n\n| | |\n|---|---|\n")
	m := r.Machine
	for _, row := range [][2]string{
		{"CPUs (`nproc`)", fmt.Sprint(m.CPUs)}, {"CPU", m.CPUModel}, {"memory", m.Memory}, {"kernel", m.Kernel},
		{"Postgres", m.PostgresVersion}, {"fsync / synchronous_commit", m.Fsync + " / " + m.SynchronousCommit},
		{"shared_buffers", m.SharedBuffers}, {"max_wal_size / checkpoint_timeout", orDash(m.MaxWALSize) + " / " + orDash(m.CheckpointTimeout)},
		{"shared_preload_libraries", orDash(m.PreloadLibraries)},
		{"pgbench", m.PgbenchVersion}, {"Go", m.GoVersion},
		{"BENCH_DURATION", r.Duration.Duration().String()},
	} {
		w("| %s | %s |\n", row[0], row[1])
	}
	w("\nThe load generator, the service, the Stripe emulator, pgbench and Postgres share these cores, and\n")
	w("other work on the machine was not stopped for the run: absolute figures are noisy, which is why every\n")
	w("service figure is read against the bare service measured seconds apart from it.\n\n")

	commitSection(&b, r)
	evidenceSection(&b, r)
	profileSection(&b, r)
	cpuCostSection(&b, r)
	statementSection(&b, r)
	waitsSection(&b, r)

	method(&b, r)
	return b.String()
}

// method is how the run measured.
func method(b *strings.Builder, r *Results) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Method\n\n")
	w("- **Clients** are closed-loop: each of *conns* clients sends its next request when the previous\n")
	w("  answer has been read whole, over keep-alive HTTP/1.1. A request counts when its answer arrives\n")
	w("  inside the window; p50/p99 are over the successful ones. Fresh payments use a new\n")
	w("  Idempotency-Key per request and client *i* sends as user *i* mod %d; replays cycle over the\n", r.Users)
	w("  finished keys and must answer 201 with `Idempotent-Replayed: true` (anything else is an error).\n")
	w("  The service and the bare service get the same requests, each under keys of its own.\n")
	w("- **The bare service** is the yardstick: a replay is one indexed read of the key; a fresh payment is\n")
	w("  fresh.sql's first transaction, the service's stripe-go call (same parameters, intent-derived\n")
	w("  Stripe key and metadata, same client), fresh.sql's second transaction, and the answer. It has no\n")
	w("  validation, fingerprint, lease renewal, outbox worker, metrics or logs; it maps API keys to users\n")
	w("  in memory, as the service's warm auth cache does, and has the service's pool size. Its transactions\n")
	w("  are written as plain code writes them (`pgx.BeginFunc`: BEGIN and COMMIT each a round trip of its\n")
	w("  own), as the service's are (`db.WithTx`).\n")
	w("- **The service** runs as `make run` serves it but for two settings: `PAYMENTSD_RATE_LIMIT=0`, since\n")
	w("  the benchmark's few users send far more than any one client should, and `PAYMENTSD_LOG_LEVEL=warn`:\n")
	w("  its one access-log line per request, at info, is not written (the bare writes none either), while\n")
	w("  each request's logger, carrying its id, is still made: the profiles count it under logging.\n")
	if p, ok := r.point(TargetConns); ok && p.LeastMeasured() {
		leastMethod(b)
	}
	w("- **Emulator alone** posts a charge (`amount=2000&currency=usd&payment_method=pm_card_visa&confirm=true`,\n")
	w("  `Authorization: Bearer sk_test_x`, a new Idempotency-Key each) straight to the emulator's\n")
	w("  `/v1/payment_intents`: the part of a fresh payment that is not ours.\n")
	w("- **Ceilings:** `harness/bench/pgbench/fresh.sql` is the bare service's two transactions of a fresh payment,\n")
	w("  statement for statement, and nothing else (one script = one payment, so its tps is payments/s);\n")
	w("  `harness/bench/pgbench/replay.sql` is the one indexed lookup of a finished key by (user, key). The shares\n")
	w("  of the ceilings are reported, not judged.\n")
	w("- **Order at each connection count:** bare fresh, emulator alone, service fresh, fresh.sql, service\n")
	w("  replays, bare replays, replay.sql. The bare runs first so that its commits have settled before\n")
	w("  the service's fresh run is bracketed (see the commits above); the emulator fills that wait.\n")
	if r.abba() {
		abbaMethod(b, r.judgedRuns())
	}
	w("  Before each run of the service and of the bare service the harness vacuums the bench database\n")
	w("  (`VACUUM (ANALYZE)`, outside the commit accounting), so that the autovacuum the previous runs'\n")
	w("  rows call for, which wakes once a minute, does not fall inside one run of a pair and not the other.\n")
	if s := r.Slow; s != nil {
		w("- **Slow processor:** after every connection count, the emulator answers every create after a\n")
		w("  fixed %.0f ms (its chaos latency, no faults) while %d clients keep payments in flight, against the\n", s.LatencyMS, s.Conns)
		w("  service and then the bare service; the latency is reset afterwards.\n")
	}
	if s := r.Many; s != nil {
		w("- **Many in flight:** after the slow point, with the same latency, %d clients keep payments in\n", s.Conns)
		w("  flight against the service, its resident memory (VmRSS, /proc) read before, every 100 ms during and\n")
		w("  after the run, and the machine's CPU time read around it as at %d connections (what a payment cost\n", TargetConns)
		w("  the CPUs, and the throughput that leaves them), then against the bare service. The service is read\n")
		w("  against the lesser of Little's bound (in flight over the latency) and the most fresh.sql sustained at\n")
		w("  any connection count of the run; the client's timeout is 30 s, and a timeout counts as an error and\n")
		w("  apart.")
		if s.Window > 0 {
			w(" Its runs measure %s after a %s\n", s.Window.Duration(), s.Warmup.Duration())
			w("  warm-up, at least 10 s after 3 s whatever the other runs': a payment there takes seconds.")
		}
		w("\n")
	}
	w("- **Targets** are judged at %d connections for throughput and p99, at every point for 409s and\n", TargetConns)
	w("  errors, and at %s connections for the writing transactions.\n", joinInts(WritesConns, " and "))
}

// abbaMethod says how the pairs judged at TargetConns were measured, runs
// times a side.
func abbaMethod(b *strings.Builder, runs int) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("- **The judged point, %d connections, runs each pair %d times, %s.** On two shared\n", TargetConns, runs, abbaOrder(runs))
	w("  cores, single runs of the same code drift by 5 to 8%% from one to the next, and a pair in a fixed order\n")
	w("  hands that drift, and whatever the first run leaves the second, to one side. So after fresh.sql the\n")
	w("  fresh pair runs %d times more, service first in every other one (the commit accounting reads the\n", runs-1)
	w("  first service run alone), and the replays run service, bare, bare, service, and so on. Each side's runs\n")
	w("  are read as one: the requests answered inside all its windows over the sum of the windows, p50 and p99\n")
	w("  over all its runs' requests together, the counts summed. The targets show each run's throughput.\n")
}

// commitSection explains the commit figures.
func commitSection(b *strings.Builder, r *Results) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	phases, writing, xact, source, _ := commitTotals(r.Points)
	w("## Commits per fresh payment\n\n")
	w("The service's first fresh run at each connection count is bracketed by two readings —\n")
	w("`pg_stat_database.xact_commit` of the bench database, the WAL position and the cluster's next transaction\n")
	w("id — taken once the service has been idle for 11 s, because Postgres publishes an idle backend's counters\n")
	w("up to 10 s late. The background measured\n")
	w("over %.1f s of idleness before the first run is subtracted (%.2f transactions/s, %.2f writing and\n",
		r.Noise.Seconds, r.Noise.XactPerSec, r.Noise.WritesPerSec)
	w("%.2f phase commits/s in the bench database; %.2f transaction ids/s in the cluster), and the rest is\n",
		r.Noise.PhaseWritesPerSec, r.Noise.XidPerSec)
	w("divided by the payments created in the run, warm-up included. The target counts writing\n")
	w("transactions at each of %s connections (the tables give every point); over every run so bracketed:\n\n", joinInts(WritesConns, " and "))
	if phases >= 0 {
		w("- **Writing transactions / payment: %.2f** — what the target counts: every transaction that wrote\n", writing)
		w("  to the bench database, the phase commits plus the service's background work for each payment\n")
		w("  (delivering its receipt through the outbox). They come from pg_walinspect: the distinct transaction\n")
		w("  ids of the WAL records that touch the bench database's relations, so nothing in other databases counts.\n")
		w("- **Phase commits / payment: %.2f** — of those, the transactions that wrote the `idempotency_keys`\n", phases)
		w("  table. Every phase commit writes the key row (its recovery point, its lease), and during the run\n")
		w("  nothing else does (the completer and the reaper only touch stalled or expired keys), so these are\n")
		w("  the commits a request waits for.\n")
	} else {
		w("- **Writing transactions / payment: %.2f** (%s) — what the target is judged on here,\n", writing, sourceName(source))
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
	var bare []string
	for _, p := range r.Points {
		if p.BareWritesPerPayment != nil {
			bare = append(bare, fmt.Sprintf("%.2f at %d", *p.BareWritesPerPayment, p.Conns))
		}
	}
	if len(bare) > 0 {
		w("- **The bare service**, which commits two writing transactions per payment and has no background\n")
		w("  work, counted from the WAL over its own runs (read at once before and after, net of the background\n")
		w("  rate): %s writing transactions per payment.\n", strings.Join(bare, ", "))
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

// profileSection shows the service's Go profiles beside the bare's, or how
// to get them.
func profileSection(b *strings.Builder, r *Results) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("## Where the service's time goes\n\n")
	if !r.Profiled {
		w("This run was not profiled. `BENCH_PROFILE=1 make bench` starts the service's profiled build with its\n")
		w("pprof server (`paymentsd-profiled -pprof`) and the bare service with its own (`paymentsd-bare -pprof`) and, in fresh\n")
		w("and replay runs of their own at %d connections, fetches a CPU profile of the window and the\n", TargetConns)
		w("allocations over it (the service's blocking too), and reads them here side by side.\n\n")
		return
	}
	bare := false
	for _, p := range r.Profiles {
		bare = bare || p.Process == "bare"
	}
	w("The service ran as its profiled build, with its pprof server on (`paymentsd-profiled -pprof`, the\n")
	w("product's command line plus pprof; block and mutex sampling are on only while their profile is taken,\n")
	w("`harness/profiling`)")
	if bare {
		w(", and so did the bare\nservice (`paymentsd-bare -pprof`, the same handler, so that both pay alike)")
	}
	profiledApart := false
	for _, p := range r.Profiles {
		profiledApart = profiledApart || p.Throughput > 0
	}
	if profiledApart {
		w(". After the judged runs\nat %d connections, the harness ran fresh payments and replays once more against each, in runs of\n", TargetConns)
		w("their own that the targets do not read (a profile costs the process it samples, and block sampling\n")
		w("the service alone), and fetched a CPU profile of each window\n")
	} else {
		w(". During the\nfresh and replay runs at %d connections of each, the harness fetched a CPU profile of the window\n", TargetConns)
	}
	w("and the allocations over the same window (delta profiles), and the service's blocking too, and\n")
	w("summarized each with `go tool pprof -top -nodecount=25`. Every process shares the machine's cores\n")
	w("with the load generator, the emulator and Postgres, so CPU time is a share of the machine's, not of\n")
	w("one core.\n\n")
	if bare {
		compareMethod(b)
	}
	if len(r.Profiles) == 0 {
		w("No profile was taken: the run had no point at %d connections.\n\n", TargetConns)
	}
	for _, scenario := range []string{"fresh", "replay"} {
		var service, bareProf *Profile
		for i := range r.Profiles {
			if p := &r.Profiles[i]; p.Scenario == scenario {
				if p.Process == "bare" {
					bareProf = p
				} else {
					service = p
				}
			}
		}
		first := cmp.Or(service, bareProf)
		if first == nil {
			continue
		}
		name := map[string]string{"fresh": "Fresh payments", "replay": "Replays"}[scenario]
		w("### %s at %d connections (%.0f s)\n\n", name, first.Conns, first.Seconds)
		if bare {
			compareProfiles(b, r, scenario, service, bareProf)
		}
		for _, p := range []*Profile{service, bareProf} {
			if p == nil {
				continue
			}
			who := "the service"
			if p.Process == "bare" {
				who = "the bare service"
			}
			if p.Error != "" {
				w("Not everything of %s could be read: %s.\n\n", who, p.Error)
			}
			for _, t := range p.Tops {
				w("<details><summary>%s: %s</summary>\n\n```text\n%s\n```\n\n</details>\n\n", who, t.Title, t.Text)
			}
		}
	}
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
	dbCostSection(b, r)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// joinInts joins numbers: "1 and 32".
func joinInts(ns []int, sep string) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, sep)
}

func connList(r *Results) string {
	parts := make([]string, len(r.Points))
	for i, p := range r.Points {
		parts[i] = fmt.Sprint(p.Conns)
	}
	return strings.Join(parts, ", ")
}
