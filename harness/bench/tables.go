package bench

import (
	"fmt"
	"slices"
	"strings"
)

// targetsTable is the targets, met or not, with how the judged point's runs
// were read as one when it ran several a side.
func targetsTable(r *Results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("| target | measured | |\n|---|---|---|\n")
	for _, t := range Evaluate(r) {
		w("| %s | %s | %s |\n", t.Name, t.Measured, mark(t.Met))
	}
	if r.abba() {
		n := r.judgedRuns()
		w("\nAt %d connections the service's and the bare service's figures are each **%d runs %s**,\n", TargetConns, n, abbaOrder(n))
		w("read as one: fresh payments bare, service, service, bare, and so on; replays service, bare, bare,\n")
		w("service, and so on. Throughput is the requests answered inside all of a side's windows over the sum of\n")
		w("its windows, p50 and p99 are over all its runs' requests together, and the counts are summed; each run's\n")
		if r.Filled.abba() {
			w("own throughput is in the targets above. The filled point's pairs ran so too; the other connection\n")
			w("counts and the slow processor are one run a side.\n")
		} else {
			w("own throughput is in the targets above. The other connection counts, the slow processor and the filled\n")
			w("point are one run a side.\n")
		}
		if p, ok := r.point(TargetConns); ok && p.LeastMeasured() {
			w("The least-SQL bare service's runs there are a third side of the same rounds (fresh payments bare,\n")
			w("service, least, then least, service, bare; replays service, bare, least, then reversed), read alike;\n")
			w("the design's targets pair each service run with the least's of its round. fresh.sql and least.sql run\n")
			w("so there too, each script's runs read as one.\n")
		}
		w("Beside each judged share the targets give each pair's share and a 95%% interval for the share from them\n")
		w("(Student's t over the pairs; for the filled point against the empty database, over each side's runs as\n")
		w("independent samples: `harness/bench/interval.go`). Where the interval holds the target's share, the run\n")
		w("cannot tell met from not met; the verdict is the share's own.\n")
	}
	return b.String()
}

// Tables renders the figures as Markdown tables: the targets, then fresh
// payments and replays with the service beside the bare service and the
// pgbench ceiling, then the slow-processor point. The console summary and
// the full report show them.
func Tables(r *Results) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("### Targets\n\n%s", targetsTable(r))
	w("\n### Fresh payments (POST /payments, a new Idempotency-Key each)\n\n")
	w("| conns | service payments/s | bare payments/s | service / bare | fresh.sql ceiling | service / ceiling | bare / ceiling " +
		"| service p50 / p99 ms | bare p50 / p99 ms | ceiling p50 / p99 ms | emulator alone req/s | emulator p50 / p99 ms |\n")
	w("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range r.Points {
		f, bf, c, e := p.Fresh, p.BareFresh, p.FreshCeiling, p.Emulator
		w("| %d | %.0f | %.0f | %s | %.0f | %s | %s | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f | %.0f | %.1f / %.1f |\n",
			p.Conns, f.Throughput, bf.Throughput, percent(f.Throughput, bf.Throughput), c.TPS,
			percent(f.Throughput, c.TPS), percent(bf.Throughput, c.TPS),
			f.P50, f.P99, bf.P50, bf.P99, c.P50, c.P99, e.Throughput, e.P50, e.P99)
	}

	w("\n### Fresh payments: conflicts, errors and commits\n\n")
	w("| conns | 409s service / bare | other non-2xx service / bare | errors service / bare " +
		"| phase commits / payment | writing tx / payment | bare writing tx / payment | xact_commit / payment |\n")
	w("|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range r.Points {
		f, bf := p.Fresh, p.BareFresh
		w("| %d | %d / %d | %s / %s | %d / %d | %s | %s | %s | %.2f |\n",
			p.Conns, f.Conflicts(), bf.Conflicts(), others(f.NonOK), others(bf.NonOK), f.Errors+f.Unexpected, bf.Errors+bf.Unexpected,
			phaseCommits(p.Commits), writing(p.Commits), bareWriting(p), p.Commits.XactPerPayment)
	}

	w("\n### Replays (the same POST with a finished key: 201 + Idempotent-Replayed: true)\n\n")
	w("| conns | service requests/s | bare requests/s | service / bare | replay.sql ceiling | service / ceiling | bare / ceiling " +
		"| service p50 / p99 ms | bare p50 / p99 ms | ceiling p50 / p99 ms | 409s service / bare | other non-2xx | errors |\n")
	w("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range r.Points {
		l, bl, c := p.Replay, p.BareReplay, p.ReplayCeiling
		w("| %d | %.0f | %.0f | %s | %.0f | %s | %s | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %d / %d | %s / %s | %d / %d |\n",
			p.Conns, l.Throughput, bl.Throughput, percent(l.Throughput, bl.Throughput), c.TPS,
			percent(l.Throughput, c.TPS), percent(bl.Throughput, c.TPS),
			l.P50, l.P99, bl.P50, bl.P99, c.P50, c.P99, l.Conflicts(), bl.Conflicts(), others(l.NonOK), others(bl.NonOK),
			l.Errors+l.Unexpected, bl.Errors+bl.Unexpected)
	}

	b.WriteString(leastTables(r))
	b.WriteString(manyTable(r))

	if s := r.Slow; s != nil {
		w("\n### Slow processor (the emulator answers every create in %.0f ms)\n\n", s.LatencyMS)
		w("| in flight | service payments/s | bare payments/s | service / bare | service p50 / p99 ms | bare p50 / p99 ms " +
			"| 409s service / bare | other non-2xx | errors |\n")
		w("|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		f, bf := s.Fresh, s.BareFresh
		w("| %d | %.0f | %.0f | %s | %.1f / %.1f | %.1f / %.1f | %d / %d | %s / %s | %d / %d |\n",
			s.Conns, f.Throughput, bf.Throughput, percent(f.Throughput, bf.Throughput), f.P50, f.P99, bf.P50, bf.P99,
			f.Conflicts(), bf.Conflicts(), others(f.NonOK), others(bf.NonOK), f.Errors+f.Unexpected, bf.Errors+bf.Unexpected)
	}
	return b.String()
}

// writing is a point's writing transactions per payment, marked † when
// counted from cluster-wide transaction ids for want of the WAL.
func writing(c Commits) string {
	v, source := c.WritingPerPayment()
	if source == "WAL" {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.2f†", v)
}

// bareWriting is the bare service's writing transactions per payment.
func bareWriting(p Point) string {
	if p.BareWritesPerPayment == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", *p.BareWritesPerPayment)
}

// phaseCommits is a point's phase commits per payment, when the WAL could
// be read.
func phaseCommits(c Commits) string {
	if c.PhaseWrites < 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", c.PhaseCommitsPerPayment)
}

func percent(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f%%", 100*a/b)
}

// others lists the non-2xx statuses other than 409, as "503×2, 500×1".
func others(nonOK map[int]int) string {
	var statuses []int
	for s := range nonOK {
		if s != 409 {
			statuses = append(statuses, s)
		}
	}
	if len(statuses) == 0 {
		return "0"
	}
	slices.Sort(statuses)
	parts := make([]string, len(statuses))
	for i, s := range statuses {
		parts[i] = fmt.Sprintf("%d×%d", s, nonOK[s])
	}
	return strings.Join(parts, ", ")
}
