package bench

import (
	"context"
	"fmt"
	"strings"
)

// # The judged pairs
//
// On a machine of two cores, single runs of the same code drift by 5 to 8%
// from one to the next, and a pair run in a fixed order hands that drift,
// and whatever the first run leaves the second, to one side. So at
// TargetConns, where the targets are judged, each side runs JudgedRuns
// times in ABBA order over and over, and its runs are read as one
// (combine): the fresh payments as bare, service, service, bare, bare,
// service, and so on; the replays as service, bare, bare, service, and so
// on. A drift that is steady over the runs weighs on both sides alike, and
// each side runs first as often as second. The filled point's pairs run so too
// (RunFilled); every other connection count and the slow-processor point
// run each side once.

// JudgedRuns is the number of runs of each side of a pair judged at
// TargetConns: even, so that each side runs first in half the pairs. Four
// pairs left a 95% interval about 7 points wide around a share that single
// runs move by 5 to 8% (interval.go); eight narrow it to about 4.
const JudgedRuns = 8

// abbaOrder says how often the ABBA order of pairs run runs a side ran:
// "in ABBA order four times over" for 8.
func abbaOrder(runs int) string {
	times := fmt.Sprintf("%d times", runs/2)
	switch runs / 2 {
	case 1:
		times = "once"
	case 2:
		times = "twice"
	case 4:
		times = "four times"
	}
	return "in ABBA order " + times + " over"
}

// vacuumedRun runs a scenario after a vacuum, with the statements it ran
// added to cost and to top (either may be nil).
func (m *measurer) vacuumedRun(ctx context.Context, sc Scenario, cost *sideCost, top snapshot) (measured, error) {
	if err := m.vacuum(ctx); err != nil {
		return measured{}, err
	}
	return m.observe(ctx, sc, cost, top)
}

// observe runs a scenario once, reading pg_stat_statements and the
// machine's CPU time right before and after it, and adds the statements it
// ran to cost and to top (either may be nil; without pg_stat_statements
// nothing is added), and the CPU time to cost.
func (m *measurer) observe(ctx context.Context, sc Scenario, cost *sideCost, top snapshot) (measured, error) {
	before, err := m.statements.Snapshot(ctx)
	if err != nil {
		return measured{}, err
	}
	cpuBefore := m.readCPU()
	s, err := waitsDuring(ctx, m.waitTarget(), cost, func() (measured, error) { return m.measure(ctx, sc) })
	if err != nil {
		return s, err
	}
	cpuAfter := m.readCPU()
	after, err := m.statements.Snapshot(ctx)
	if err != nil {
		return s, err
	}
	if m.watcher != nil {
		m.watcher.Touched()
	}
	if top != nil {
		addDelta(top, before, after)
	}
	cost.add(before, after, s.Total)
	cost.addCPU(cpuBefore, cpuAfter, s.Total)
	return s, nil
}

// runPair runs a pair's first runs, a then b, and completes it (abba).
func (m *measurer) runPair(a, b func() (measured, error)) (Load, Load, error) {
	loads, err := m.runSides(a, b)
	if err != nil {
		return Load{}, Load{}, err
	}
	return loads[0], loads[1], nil
}

// runSides runs each side once, in the order given, and completes them
// (abbaSides).
func (m *measurer) runSides(sides ...func() (measured, error)) ([]Load, error) {
	firsts := make([]measured, len(sides))
	for i, side := range sides {
		var err error
		if firsts[i], err = side(); err != nil {
			return nil, err
		}
	}
	return m.abbaSides(firsts, sides)
}

// abba completes a pair whose two sides have run once each, a then b
// (abbaSides), and returns each side's Load in the order given.
func (m *measurer) abba(a, b measured, againA, againB func() (measured, error)) (Load, Load, error) {
	loads, err := m.abbaSides([]measured{a, b}, []func() (measured, error){againA, againB})
	if err != nil {
		return Load{}, Load{}, err
	}
	return loads[0], loads[1], nil
}

// abbaSides completes sides that have run once each, in the order given
// (firsts). At TargetConns it runs them all JudgedRuns-1 times more, in
// reverse order every other time (for three sides: a b c, c b a, a b c,
// and so on, so that of any two sides each runs first in half the
// rounds), and returns each side's runs combined, in the order given; at
// any other connection count it returns the single runs.
func (m *measurer) abbaSides(firsts []measured, again []func() (measured, error)) ([]Load, error) {
	loads := make([]Load, len(firsts))
	if m.conns != TargetConns {
		for i, f := range firsts {
			loads[i] = f.Load
		}
		return loads, nil
	}
	runs := make([][]measured, len(firsts))
	for i, f := range firsts {
		runs[i] = []measured{f}
	}
	what := "the pair"
	if len(firsts) > 2 {
		what = "the sides"
	}
	for round := 1; round < JudgedRuns; round++ {
		reversed, order := round%2 == 1, "in order"
		if reversed {
			order = "in reverse order"
		}
		logf(m.cfg.Log, "  %s again (%d of %d), %s:", what, round+1, JudgedRuns, order)
		for k := range again {
			i := k
			if reversed {
				i = len(again) - 1 - k
			}
			x, err := again[i]()
			if err != nil {
				return nil, err
			}
			runs[i] = append(runs[i], x)
		}
	}
	for i := range runs {
		loads[i] = combine(runs[i]...)
		logf(m.cfg.Log, "  %-15s %8.1f/s  p50 %7.2f ms  p99 %7.2f ms  %d runs combined (%s/s)",
			firsts[i].name, loads[i].Throughput, loads[i].P50, loads[i].P99, len(loads[i].Runs), runList(loads[i].Runs))
	}
	return loads, nil
}

// runList is the throughputs of a combined Load's runs, in the order they
// ran: "913, 880, 902 and 925".
func runList(runs []float64) string { return listOf(runs, "%.0f", 1) }

// listOf is values, each times scale in format, as a list in prose:
// "a, b, c and d".
func listOf(values []float64, format string, scale float64) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = fmt.Sprintf(format, v*scale)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
