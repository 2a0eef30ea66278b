package bench

import (
	"fmt"
	"strings"
)

// The targets, from design.md section 5 and the benchmark's brief.
const (
	// TargetConns is the connection count the ratio and p99 targets are
	// judged at.
	TargetConns = 32
	// FreshRatio is the least share of the fresh.sql ceiling fresh
	// payments must reach.
	FreshRatio = 0.75
	// FreshP99 is the most a fresh payment's p99 may be, in milliseconds.
	FreshP99 = 50.0
	// ReplayRatio is the least share of the replay.sql ceiling replays
	// must reach.
	ReplayRatio = 0.40
	// CommitsPerPayment is the number of writing transactions a fresh
	// payment should cost, with CommitsTolerance for the background noise.
	CommitsPerPayment = 2.0
	CommitsTolerance  = 0.1
)

// Target is one target and whether the run met it.
type Target struct {
	Name     string
	Measured string
	Met      bool
}

// Evaluate judges the run against every target.
func Evaluate(r *Results) []Target {
	var targets []Target
	p, ok := r.point(TargetConns)
	at := fmt.Sprintf(" at %d connections", TargetConns)
	if !ok {
		missing := "not measured (no run at " + fmt.Sprint(TargetConns) + " connections)"
		targets = append(targets,
			Target{Name: fmt.Sprintf("fresh payments ≥ %.0f%% of the fresh.sql ceiling", FreshRatio*100) + at, Measured: missing},
			Target{Name: fmt.Sprintf("fresh p99 ≤ %.0f ms", FreshP99) + at, Measured: missing},
			Target{Name: fmt.Sprintf("replays ≥ %.0f%% of the replay.sql ceiling", ReplayRatio*100) + at, Measured: missing})
	} else {
		fr, rr := ratio(p.Fresh.Throughput, p.FreshCeiling.TPS), ratio(p.Replay.Throughput, p.ReplayCeiling.TPS)
		targets = append(targets,
			Target{
				Name:     fmt.Sprintf("fresh payments ≥ %.0f%% of the fresh.sql ceiling", FreshRatio*100) + at,
				Measured: fmt.Sprintf("%.0f%% (%.0f of %.0f payments/s)", fr*100, p.Fresh.Throughput, p.FreshCeiling.TPS),
				Met:      fr >= FreshRatio,
			},
			Target{
				Name:     fmt.Sprintf("fresh p99 ≤ %.0f ms", FreshP99) + at,
				Measured: fmt.Sprintf("%.1f ms", p.Fresh.P99),
				Met:      p.Fresh.OK > 0 && p.Fresh.P99 <= FreshP99,
			},
			Target{
				Name:     fmt.Sprintf("replays ≥ %.0f%% of the replay.sql ceiling", ReplayRatio*100) + at,
				Measured: fmt.Sprintf("%.0f%% (%.0f of %.0f requests/s)", rr*100, p.Replay.Throughput, p.ReplayCeiling.TPS),
				Met:      rr >= ReplayRatio,
			})
	}

	var conflicts, failures []string
	for _, p := range r.Points {
		for _, l := range []struct {
			name string
			load Load
		}{{"fresh", p.Fresh}, {"replay", p.Replay}} {
			if n := l.load.Conflicts(); n > 0 {
				conflicts = append(conflicts, fmt.Sprintf("%d %s at %d", n, l.name, p.Conns))
			}
			if n := l.load.Failures(); n > 0 {
				failures = append(failures, fmt.Sprintf("%d %s at %d", n, l.name, p.Conns))
			}
		}
	}
	targets = append(targets,
		Target{Name: "zero 409s at every connection count", Measured: orNone(conflicts), Met: len(conflicts) == 0},
		Target{Name: "zero errors at every connection count (transport, other non-2xx, wrong answers)",
			Measured: orNone(failures), Met: len(failures) == 0})

	phases, writing, xact, source, ok := commitTotals(r.Points)
	commits := Target{Name: fmt.Sprintf("%.0f commits per fresh payment", CommitsPerPayment)}
	switch {
	case !ok:
		commits.Measured = "not measured"
	case phases >= 0:
		commits.Measured = fmt.Sprintf("%.2f phase commits (transactions writing idempotency_keys, from the WAL); "+
			"%.2f writing transactions in all, background work included; %.2f by xact_commit", phases, writing, xact)
		commits.Met = phases <= CommitsPerPayment+CommitsTolerance
	default:
		commits.Measured = fmt.Sprintf("%.2f writing transactions (%s, background work included); %.2f by xact_commit",
			writing, sourceName(source), xact)
		commits.Met = writing <= CommitsPerPayment+CommitsTolerance
	}
	return append(targets, commits)
}

// commitTotals are the commits per payment over every fresh run, weighted
// by payments: phase commits (negative when the WAL could not be read for
// every run), writing transactions (from the WAL when every run could read
// it, else from transaction ids, as source says) and xact_commit
// transactions.
func commitTotals(points []Point) (phases, writing, xact float64, source string, ok bool) {
	source = "WAL"
	for _, p := range points {
		if p.Commits.Writes < 0 {
			source = "xid"
		}
	}
	var payments int
	for _, p := range points {
		n := float64(p.Commits.Payments)
		v, _ := p.Commits.WritingPerPayment()
		writing += v * n
		phases += p.Commits.PhaseCommitsPerPayment * n
		xact += p.Commits.XactPerPayment * n
		payments += p.Commits.Payments
	}
	if payments == 0 {
		return 0, 0, 0, source, false
	}
	phases, writing, xact = phases/float64(payments), writing/float64(payments), xact/float64(payments)
	if source != "WAL" {
		phases = -1
	}
	return phases, writing, xact, source, true
}

// point is the measurement at conns connections.
func (r *Results) point(conns int) (Point, bool) {
	for _, p := range r.Points {
		if p.Conns == conns {
			return p, true
		}
	}
	return Point{}, false
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

func orNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

// sourceName says where a count of writing transactions comes from.
func sourceName(source string) string {
	if source == "WAL" {
		return "from the WAL"
	}
	return "from cluster-wide transaction ids"
}

// mark is how a report shows a target's outcome.
func mark(met bool) string {
	if met {
		return "met"
	}
	return "**not met**"
}
