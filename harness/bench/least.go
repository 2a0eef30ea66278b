package bench

import "context"

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
	first, err := leastFresh()
	if err != nil {
		return err
	}
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
