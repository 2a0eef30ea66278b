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
// TargetConns, where the targets are judged, each pair runs twice in ABBA
// order and each side's two runs are read as one (combine): the fresh
// payments as bare, service, then service, bare; the replays as service,
// bare, bare, service. A drift that is steady over the four runs weighs on
// both sides alike, and each side runs once first and once second. Every
// other connection count, the slow-processor point and the filled point
// run each side once.

// serviceRun runs a scenario against the service after a vacuum, with the
// statements it ran added to sum.
func (m *measurer) serviceRun(ctx context.Context, sc Scenario, sum snapshot) (measured, error) {
	if err := m.vacuum(ctx); err != nil {
		return measured{}, err
	}
	before, err := m.statements.Snapshot(ctx)
	if err != nil {
		return measured{}, err
	}
	s, err := m.measure(ctx, sc)
	if err != nil {
		return s, err
	}
	after, err := m.statements.Snapshot(ctx)
	if err != nil {
		return s, err
	}
	m.watcher.Touched()
	addDelta(sum, before, after)
	return s, nil
}

// bareRun runs a scenario against the bare service after a vacuum.
func (m *measurer) bareRun(ctx context.Context, sc Scenario) (measured, error) {
	if err := m.vacuum(ctx); err != nil {
		return measured{}, err
	}
	s, err := m.measure(ctx, sc)
	if err != nil {
		return s, err
	}
	m.watcher.Touched()
	return s, nil
}

// abba completes a pair whose two sides have run once each, a then b. At
// TargetConns it runs them once more in reverse order, b's side (againB)
// then a's (againA), and returns each side's two runs combined, in the
// order the sides were given; at any other connection count it returns
// the single runs.
func (m *measurer) abba(a, b measured, againA, againB func() (measured, error)) (Load, Load, error) {
	if m.conns != TargetConns {
		return a.Load, b.Load, nil
	}
	logf(m.cfg.Log, "  the pair once more, in reverse order (ABBA):")
	b2, err := againB()
	if err != nil {
		return Load{}, Load{}, err
	}
	a2, err := againA()
	if err != nil {
		return Load{}, Load{}, err
	}
	combinedA, combinedB := combine(a, a2), combine(b, b2)
	for _, side := range []struct {
		name string
		load Load
	}{{a.name, combinedA}, {b.name, combinedB}} {
		logf(m.cfg.Log, "  %-15s %8.1f/s  p50 %7.2f ms  p99 %7.2f ms  two runs combined (%s/s)",
			side.name, side.load.Throughput, side.load.P50, side.load.P99, runList(side.load.Runs))
	}
	return combinedA, combinedB, nil
}

// runList is the throughputs of a combined Load's runs, in the order they
// ran: "913 and 925".
func runList(runs []float64) string {
	parts := make([]string, len(runs))
	for i, v := range runs {
		parts[i] = fmt.Sprintf("%.0f", v)
	}
	return strings.Join(parts, " and ")
}
