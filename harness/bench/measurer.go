package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
)

// measurer measures one connection count.
type measurer struct {
	cfg        Config
	watcher    *Watcher
	statements *Statements
	wal        *WAL
	noise      Noise
	conns      int
}

// load runs a scenario once and returns its Load (see measure).
func (m *measurer) load(ctx context.Context, sc Scenario) (Load, error) {
	s, err := m.measure(ctx, sc)
	return s.Load, err
}

// measure runs a scenario once, logs its figures, and fails when nothing
// succeeded.
func (m *measurer) measure(ctx context.Context, sc Scenario) (measured, error) {
	s, err := loadRun{conns: m.conns, warmup: m.cfg.Warmup, window: m.cfg.Duration}.Run(ctx, sc)
	if err != nil {
		return s, err
	}
	if s.Total == 0 {
		return s, fmt.Errorf("%s at %d connections: no successful request (non-2xx %v, %d unexpected, %d transport errors)",
			sc.Name, m.conns, s.NonOK, s.Unexpected, s.Errors)
	}
	s.name = sc.Name
	logf(m.cfg.Log, "  %-15s %8.1f/s  p50 %7.2f ms  p99 %7.2f ms  non-2xx %v  errors %d",
		sc.Name, s.Throughput, s.P50, s.P99, s.NonOK, s.Errors+s.Unexpected)
	return s, nil
}

// ceiling runs a pgbench script, once more when it finished nothing at all
// (a stall of the machine longer than the run). With a cost, it reads
// pg_stat_statements right before and after (two readings: Readings each)
// and adds the script's statements and transactions to it.
func (m *measurer) ceiling(ctx context.Context, script string, cost *sideCost) (Ceiling, error) {
	var (
		before    snapshot
		cpuBefore *cpuReading
	)
	if cost != nil {
		var err error
		if before, err = m.statements.Snapshot(ctx); err != nil {
			return Ceiling{}, err
		}
		cpuBefore = m.readCPU()
	}
	c, err := m.cfg.PGBench.Run(ctx, filepath.Join(m.cfg.Scripts, script), m.conns)
	if errors.Is(err, errNothingProcessed) {
		logf(m.cfg.Log, "  %v; running it again", err)
		c, err = m.cfg.PGBench.Run(ctx, filepath.Join(m.cfg.Scripts, script), m.conns)
	}
	if err != nil {
		return c, err
	}
	logf(m.cfg.Log, "  %-15s %8.1f/s  p50 %7.2f ms  p99 %7.2f ms", script, c.TPS, c.P50, c.P99)
	if cost != nil {
		cpuAfter := m.readCPU()
		after, err := m.statements.Snapshot(ctx)
		if err != nil {
			return c, err
		}
		cost.add(before, after, c.Transactions)
		cost.addCPU(cpuBefore, cpuAfter, c.Transactions)
	}
	return c, nil
}

// readCPU reads the machine's CPU time (readCPU); nil when /proc cannot be
// read.
func (m *measurer) readCPU() *cpuReading {
	r, err := readCPU(m.cfg.Processes)
	if err != nil {
		return nil
	}
	return &r
}
