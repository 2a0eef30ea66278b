package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// waitsShown is how many wait events the report names per side.
const waitsShown = 4

// waitsSection shows what the bench database's backends were doing during
// each side's runs at TargetConns (Waits), on the empty database and,
// after a fill, on the filled one beside it. It writes nothing when
// pg_stat_activity was not sampled.
func waitsSection(b *strings.Builder, r *Results) {
	e, ok := r.point(TargetConns)
	if !ok || e.Waits == nil {
		return
	}
	var f *WaitCosts
	if r.Filled.Measured() {
		f = r.Filled.Waits
	}
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("### What the database's connections were doing, at %d connections\n\n", TargetConns)
	w("Sampled from pg_stat_activity every %s during each side's runs (warm-up included; the service's first fresh\n", waitInterval)
	w("run, inside the commit accounting, is not sampled), from another database so that the sampling reaches neither\n")
	w("the bench database's statements nor its commits (`harness/bench/waits.go`): the mean number of the bench\n")
	w("database's backends inside a statement and waiting on no event (on a CPU or ready for one), inside a\n")
	w("statement and waiting on an event (a lock, a buffer, I/O, the WAL, the client), and idle inside a\n")
	w("transaction (their client is between two of its statements). The service's background workers' backends\n")
	w("count in every run, the bare's included; idle backends, which wait for their client's next statement,\n")
	w("are not counted. ")
	sideTable(w, e.Waits, f, []sideColumn[Waits]{
		{"samples", "%.0f", func(v *Waits) float64 { return float64(v.Samples) }},
		{"in a statement, not waiting", "%.2f", func(v *Waits) float64 { return v.OnCPU }},
		{"in a statement, waiting", "%.2f", func(v *Waits) float64 { return v.Waiting() }},
		{"idle in a transaction", "%.2f", func(v *Waits) float64 { return v.IdleInTransaction }},
	})
	for _, s := range sideNames {
		if line := waitEvents(sideOf(e.Waits, s.side), sideOf(f, s.side)); line != "" {
			w("- **%s** waited most on %s.\n", s.name, line)
		}
	}
	w("\n")
}

// waitEvents names the events the most backends waited on, on the empty
// database or the filled one, with their means on each ("IO:DataFileRead
// 0.01 → 0.20"); empty when neither waited on any.
func waitEvents(empty, filled *Waits) string {
	means := func(v *Waits) map[string]float64 {
		m := map[string]float64{}
		if v != nil {
			for _, e := range v.Events {
				m[e.Event] = e.Backends
			}
		}
		return m
	}
	em, fm := means(empty), means(filled)
	var events []string
	for e := range em {
		events = append(events, e)
	}
	for e := range fm {
		if _, ok := em[e]; !ok {
			events = append(events, e)
		}
	}
	most := func(e string) float64 { return max(em[e], fm[e]) }
	slices.SortFunc(events, func(a, b string) int { return cmp.Or(cmp.Compare(most(b), most(a)), cmp.Compare(a, b)) })
	if len(events) > waitsShown {
		events = events[:waitsShown]
	}
	parts := make([]string, len(events))
	for i, e := range events {
		parts[i] = fmt.Sprintf("`%s` %.2f", e, em[e])
		if filled != nil {
			parts[i] += fmt.Sprintf(" → %.2f", fm[e])
		}
	}
	return strings.Join(parts, ", ")
}
