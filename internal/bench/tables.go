package bench

import (
	"fmt"
	"slices"
	"strings"
)

// Tables renders the figures as Markdown tables: the targets, fresh payments
// beside their ceiling and the emulator, and replays beside theirs. The
// console summary and BENCHMARKS.md both show them.
func Tables(r *Results) string {
	var b strings.Builder
	b.WriteString("### Targets\n\n| target | measured | |\n|---|---|---|\n")
	for _, t := range Evaluate(r) {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", t.Name, t.Measured, mark(t.Met))
	}

	b.WriteString("\n### Fresh payments (POST /payments, a new Idempotency-Key each)\n\n")
	b.WriteString("| conns | service payments/s | fresh.sql ceiling payments/s | ratio | p50 ms | p99 ms | ceiling p50 / p99 ms " +
		"| emulator alone req/s | emulator p50 / p99 ms | 409s | other non-2xx | errors | phase commits / payment " +
		"| writing tx / payment | xact_commit / payment |\n")
	b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range r.Points {
		f, c, e := p.Fresh, p.FreshCeiling, p.Emulator
		fmt.Fprintf(&b, "| %d | %.0f | %.0f | %s | %.1f | %.1f | %.1f / %.1f | %.0f | %.1f / %.1f | %d | %s | %d | %s | %s | %.2f |\n",
			p.Conns, f.Throughput, c.TPS, percent(f.Throughput, c.TPS), f.P50, f.P99, c.P50, c.P99,
			e.Throughput, e.P50, e.P99, f.Conflicts(), others(f.NonOK), f.Errors+f.Unexpected,
			phaseCommits(p.Commits), writing(p.Commits), p.Commits.XactPerPayment)
	}

	b.WriteString("\n### Replays (the same POST with a finished key: 201 + Idempotent-Replayed: true)\n\n")
	b.WriteString("| conns | service requests/s | replay.sql ceiling lookups/s | ratio | p50 ms | p99 ms | ceiling p50 / p99 ms " +
		"| 409s | other non-2xx | errors |\n")
	b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range r.Points {
		l, c := p.Replay, p.ReplayCeiling
		fmt.Fprintf(&b, "| %d | %.0f | %.0f | %s | %.2f | %.2f | %.2f / %.2f | %d | %s | %d |\n",
			p.Conns, l.Throughput, c.TPS, percent(l.Throughput, c.TPS), l.P50, l.P99, c.P50, c.P99,
			l.Conflicts(), others(l.NonOK), l.Errors+l.Unexpected)
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
