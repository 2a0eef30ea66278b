package bench

import "fmt"

// The design's targets (issue 29): the service read against the least SQL
// that does the job (least.go), measured in the same run. The engine's
// targets (targets.go) read it against the same-SQL bare service, which
// carries the service's schema with it; these read what that schema and
// its statements cost. Judged at TargetConns like the engine's.
const (
	// LeastCeilingRatio is the least share of least.sql's pgbench ceiling
	// the service's own SQL (fresh.sql) must sustain.
	LeastCeilingRatio = 0.75
	// LeastRatio is the least share of the least-SQL bare service's
	// throughput the service's fresh payments must reach, and LeastP99
	// the most their p99 may be, as a multiple of its.
	LeastRatio = 0.75
	LeastP99   = 1.3
	// LeastReplayRatio is the least share for replays.
	LeastReplayRatio = 0.85
)

// leastTargets judges the service against the least SQL at TargetConns.
func leastTargets(r *Results) []Target {
	at := fmt.Sprintf(" at %d connections", TargetConns)
	ceiling := Target{Name: fmt.Sprintf("the service's own SQL ceiling (fresh.sql) ≥ %.0f%% of the least SQL's (least.sql)", LeastCeilingRatio*100) + at}
	fresh := Target{Name: fmt.Sprintf("fresh payments ≥ %.0f%% of the least-SQL bare service's throughput", LeastRatio*100) + at}
	p99 := Target{Name: fmt.Sprintf("fresh payments p99 ≤ %.1f× the least-SQL bare service's", LeastP99) + at}
	replay := Target{Name: fmt.Sprintf("replays ≥ %.0f%% of the least-SQL bare service's throughput", LeastReplayRatio*100) + at}
	targets := []*Target{&ceiling, &fresh, &p99, &replay}
	p, ok := r.point(TargetConns)
	switch {
	case !ok:
		for _, t := range targets {
			t.Measured = fmt.Sprintf("not measured (no run at %d connections)", TargetConns)
		}
	case !p.LeastMeasured():
		for _, t := range targets {
			t.Measured = "not measured (the run had no least-SQL bare service)"
		}
	default:
		c, lc := p.FreshCeiling, p.LeastCeiling
		share := ratio(c.TPS, lc.TPS)
		ceiling.Measured = fmt.Sprintf("%.0f%% (%.0f of %.0f payments/s)", share*100, c.TPS, lc.TPS)
		if len(c.Runs) > 0 || len(lc.Runs) > 0 {
			ceiling.Measured += fmt.Sprintf("; runs (ABBA): fresh.sql %s, least.sql %s", runList(c.Runs), runList(lc.Runs))
			ceiling.Measured += pairInterval(Load{Runs: c.Runs}, Load{Runs: lc.Runs}, LeastCeilingRatio)
		}
		ceiling.Met = lc.TPS > 0 && share >= LeastCeilingRatio
		fresh.Measured, fresh.Met = shareOf(p.Fresh, p.LeastFresh, "payments/s", LeastRatio)
		fresh.Measured += leastRuns(p.Fresh, p.LeastFresh) + pairInterval(p.Fresh, p.LeastFresh, LeastRatio)
		p99.Measured, p99.Met = p99Of(p.Fresh, p.LeastFresh, LeastP99)
		replay.Measured, replay.Met = shareOf(p.Replay, p.LeastReplay, "requests/s", LeastReplayRatio)
		replay.Measured += leastRuns(p.Replay, p.LeastReplay) + pairInterval(p.Replay, p.LeastReplay, LeastReplayRatio)
	}
	return []Target{ceiling, fresh, p99, replay}
}

// leastRuns is each run's throughput when the judged sides are combined
// runs, "; runs (ABBA): service 900 and 936, least 1500 and 1480", and
// empty when they are single runs.
func leastRuns(svc, least Load) string {
	if len(svc.Runs) == 0 && len(least.Runs) == 0 {
		return ""
	}
	return fmt.Sprintf("; runs (ABBA): service %s, least %s", runList(svc.Runs), runList(least.Runs))
}
