package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// # The design's yardstick
//
// The bare service over the service's own SQL reads the engine's cost:
// what the service spends around the same statements. It carries the
// service's schema with it, so it cannot see what that schema costs. The
// bare service over the least SQL that does the job (paymentsd-bare -sql
// least, harness/bench/least) can: the same HTTP handling, the same
// stripe-go call to the same emulator, the same pool, and the least two
// transactions and the one indexed read that do a payment's job. With it
// in a run, each connection count also measures it and its ceilings
// (least.sql, least_replay.sql), and its runs join the service's and the
// same-SQL bare's at TargetConns, three sides in ABBA order (abbaSides),
// so that the service reads against both yardsticks in one run.

// withLeast measures the point's remaining runs with the least SQL beside
// them: least.sql right after fresh.sql (whose run and calibration came
// before), at TargetConns both again in ABBA order (ceilingRounds), the
// least-SQL bare service's first fresh run, the three fresh
// sides completed together (bare, service, least; then reversed), the
// three replay sides (service, bare, least; then reversed), and the two
// replay ceilings.
func (m *measurer) withLeast(ctx context.Context, p *Point, sums *costSums, bareFresh, fresh measured,
	bareFreshAgain, freshAgain, serviceReplays, bareReplays func() (measured, error)) error {
	var err error
	if p.LeastCeiling, err = m.ceiling(ctx, "least.sql", &sums.leastSQL); err != nil {
		return err
	}
	if err := m.ceilingRounds(ctx, p, sums); err != nil {
		return err
	}
	leastFresh := func() (measured, error) {
		return m.vacuumedRun(ctx, FreshScenario("least fresh", m.cfg.LeastURL, m.cfg.Users), &sums.leastFresh, nil)
	}
	// The first run is bracketed by settled readings, as the service's
	// first is, for the database's evidence (evidence.go).
	if err := m.vacuum(ctx); err != nil {
		return err
	}
	m.watcher.Touched()
	start, err := m.watcher.Settle(ctx)
	if err != nil {
		return err
	}
	evidence := m.evidenceBracket(ctx, start)
	first, err := m.observe(ctx, FreshScenario("least fresh", m.cfg.LeastURL, m.cfg.Users), &sums.leastFresh, nil)
	if err != nil {
		return err
	}
	end, err := m.watcher.Settle(ctx)
	if err != nil {
		return err
	}
	if p.Evidence == nil {
		p.Evidence = &EvidenceSides{}
	}
	p.Evidence.Least = evidence(end, first.Total)
	fresher, err := m.abbaSides([]measured{bareFresh, fresh, first}, []func() (measured, error){bareFreshAgain, freshAgain, leastFresh})
	if err != nil {
		return err
	}
	p.BareFresh, p.Fresh, p.LeastFresh = fresher[0], fresher[1], fresher[2]

	leastReplays := func() (measured, error) {
		return m.vacuumedRun(ctx, ReplayScenario("least replays", m.cfg.LeastURL, m.cfg.Users, m.cfg.ReplayKeys, LeastReplayPrefix), &sums.leastReplay, nil)
	}
	replays, err := m.runSides(serviceReplays, bareReplays, leastReplays)
	if err != nil {
		return err
	}
	p.Replay, p.BareReplay, p.LeastReplay = replays[0], replays[1], replays[2]
	if p.ReplayCeiling, err = m.ceiling(ctx, "replay.sql", nil); err != nil {
		return err
	}
	p.LeastReplayCeiling, err = m.ceiling(ctx, "least_replay.sql", nil)
	return err
}

// leastMethod says how the least SQL was measured, for the reports'
// method.
func leastMethod(b *strings.Builder) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	w("- **The least-SQL bare service** is the design's yardstick: the bare service's code over the least SQL\n")
	w("  that does the job instead of the service's (`paymentsd-bare -sql least`, a process of its own with the\n")
	w("  same pool size), on a schema of its own (`leastsql`, harness/bench/least/schema.sql, created by it in the\n")
	w("  bench database; only the users are the service's). The key with its unique index, the payment (its\n")
	w("  UUIDv7 public id its only key), an audit row per change, a staged job and the stored answer: five indexes,\n")
	w("  no updated column indexed. Its first transaction inserts the key at the point it reaches, then the\n")
	w("  payment and its audit row; its second records the outcome and its audit row, stages the job and\n")
	w("  finishes the key under its lease; a replay is one indexed read. `least.sql` and `least_replay.sql` are\n")
	w("  its ceilings, statement for statement. At each connection count least.sql runs right after fresh.sql,\n")
	w("  then the least-SQL bare's fresh run; at %d connections its fresh runs join the judged ones as a third\n", TargetConns)
	w("  side (bare, service, least; then least, service, bare; and so on), and its replays likewise (service,\n")
	w("  bare, least; then reversed), so that of any two sides each runs first in half the rounds. There,\n")
	w("  fresh.sql and least.sql run %d times each too, least.sql first in every other round, each script's runs\n", JudgedRuns)
	w("  read as one (its transactions over their time, p50 and p99 over all of them); elsewhere, and for the\n")
	w("  replay ceilings, one run each.\n")
}

// ceilingRounds completes the two fresh ceilings at TargetConns, whose
// first runs (fresh.sql, then least.sql) have run: JudgedRuns-1 rounds
// more, least.sql first in every other one, each script's runs read as
// one (combineCeilings), so that the design's ceiling target, like the
// throughput targets, reads pairs in ABBA order rather than one pair in a
// fixed order. The calibration of the commit accounting reads fresh.sql's
// first run alone, before this. At any other connection count the single
// runs stand.
func (m *measurer) ceilingRounds(ctx context.Context, p *Point, sums *costSums) error {
	if m.conns != TargetConns {
		return nil
	}
	fresh, least := []Ceiling{p.FreshCeiling}, []Ceiling{p.LeastCeiling}
	for round := 1; round < JudgedRuns; round++ {
		order := []string{"fresh.sql", "least.sql"}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		logf(m.cfg.Log, "  the ceilings again (%d of %d), %s first:", round+1, JudgedRuns, order[0])
		for _, script := range order {
			cost := &sums.freshSQL
			if script == "least.sql" {
				cost = &sums.leastSQL
			}
			c, err := m.ceiling(ctx, script, cost)
			if err != nil {
				return err
			}
			if script == "least.sql" {
				least = append(least, c)
			} else {
				fresh = append(fresh, c)
			}
		}
	}
	calibration := p.FreshCeiling
	p.FreshCeiling, p.LeastCeiling = combineCeilings(fresh...), combineCeilings(least...)
	p.FreshCeiling.XactPerScript, p.FreshCeiling.WritesPerScript = calibration.XactPerScript, calibration.WritesPerScript
	logf(m.cfg.Log, "  fresh.sql %8.1f/s, least.sql %8.1f/s, %d runs each combined (fresh.sql %s/s; least.sql %s/s)",
		p.FreshCeiling.TPS, p.LeastCeiling.TPS, JudgedRuns, runList(p.FreshCeiling.Runs), runList(p.LeastCeiling.Runs))
	return nil
}

// combineCeilings reads runs of one script as one: its transactions over
// the time they took (each run's transactions over its throughput), p50
// and p99 over all their latencies together, the counts summed, and each
// run's throughput in Runs.
func combineCeilings(runs ...Ceiling) Ceiling {
	var (
		c    Ceiling
		secs float64
		lat  []time.Duration
	)
	for _, r := range runs {
		c.Transactions += r.Transactions
		c.Failed += r.Failed
		if r.TPS > 0 {
			secs += float64(r.Transactions) / r.TPS
		}
		lat = append(lat, r.latencies...)
		c.Runs = append(c.Runs, r.TPS)
	}
	if secs > 0 {
		c.TPS = float64(c.Transactions) / secs
	}
	slices.Sort(lat)
	c.P50, c.P99 = ms(percentile(lat, 0.50)), ms(percentile(lat, 0.99))
	return c
}
