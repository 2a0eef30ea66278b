package bench

import (
	"fmt"
	"strings"
)

// leastTables renders the design's cost, at every point that measured the
// least SQL: the service beside the bare service over the least SQL that
// does the job and beside the same-SQL bare, and the two SQL ceilings, for
// fresh payments and for replays. Empty when no point measured it.
func leastTables(r *Results) string {
	var points []Point
	for _, p := range r.Points {
		if p.LeastMeasured() {
			points = append(points, p)
		}
	}
	if len(points) == 0 {
		return ""
	}
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("\n### The design's cost: fresh payments against the least SQL that does the job\n\n")
	w("The engine's cost is the service against the bare service over its own SQL; the design's, against the\n")
	w("bare service over the least SQL (harness/bench/least), and fresh.sql's ceiling against least.sql's.\n\n")
	w("| conns | service payments/s | same-SQL bare | least-SQL bare | service / same-SQL bare | service / least-SQL bare " +
		"| fresh.sql ceiling | least.sql ceiling | fresh.sql / least.sql | service p50 / p99 ms | least-SQL bare p50 / p99 ms | least.sql p50 / p99 ms |\n")
	w("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range points {
		f, bf, lf, c, lc := p.Fresh, p.BareFresh, p.LeastFresh, p.FreshCeiling, p.LeastCeiling
		w("| %d | %.0f | %.0f | %.0f | %s | %s | %.0f | %.0f | %s | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f |\n",
			p.Conns, f.Throughput, bf.Throughput, lf.Throughput, percent(f.Throughput, bf.Throughput), percent(f.Throughput, lf.Throughput),
			c.TPS, lc.TPS, percent(c.TPS, lc.TPS), f.P50, f.P99, lf.P50, lf.P99, lc.P50, lc.P99)
	}
	w("\n### The design's cost: replays against the least SQL\n\n")
	w("| conns | service requests/s | same-SQL bare | least-SQL bare | service / same-SQL bare | service / least-SQL bare " +
		"| replay.sql ceiling | least_replay.sql ceiling | service p50 / p99 ms | least-SQL bare p50 / p99 ms | 409s / other non-2xx / errors, least-SQL bare fresh and replays |\n")
	w("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range points {
		l, bl, ll, lf := p.Replay, p.BareReplay, p.LeastReplay, p.LeastFresh
		w("| %d | %.0f | %.0f | %.0f | %s | %s | %.0f | %.0f | %.2f / %.2f | %.2f / %.2f | %d / %s / %d, %d / %s / %d |\n",
			p.Conns, l.Throughput, bl.Throughput, ll.Throughput, percent(l.Throughput, bl.Throughput), percent(l.Throughput, ll.Throughput),
			p.ReplayCeiling.TPS, p.LeastReplayCeiling.TPS, l.P50, l.P99, ll.P50, ll.P99,
			lf.Conflicts(), others(lf.NonOK), lf.Errors+lf.Unexpected, ll.Conflicts(), others(ll.NonOK), ll.Errors+ll.Unexpected)
	}
	return b.String()
}
