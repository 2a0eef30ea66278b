package bench

import (
	"context"
	"fmt"
	"strings"
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
// before), the least-SQL bare service's first fresh run, the three fresh
// sides completed together (bare, service, least; then reversed), the
// three replay sides (service, bare, least; then reversed), and the two
// replay ceilings.
func (m *measurer) withLeast(ctx context.Context, p *Point, sums *costSums, bareFresh, fresh measured,
	bareFreshAgain, freshAgain, serviceReplays, bareReplays func() (measured, error)) error {
	var err error
	if p.LeastCeiling, err = m.ceiling(ctx, "least.sql", &sums.leastSQL); err != nil {
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
	w("  bare, least; then reversed), so that of any two sides each runs first in half the rounds. The\n")
	w("  ceilings are one run each.\n")
}
