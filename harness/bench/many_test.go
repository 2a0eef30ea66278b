package bench

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestManyTarget reads the many-in-flight point against the lesser of
// Little's bound and the SQL ceiling, and fails it on a timeout or an
// error whatever the throughput.
func TestManyTarget(t *testing.T) {
	r := sample() // fresh.sql 800/s at every point; Little's bound 4000/s
	got := manyTarget(r)
	require.True(t, got.Met, got.Measured)
	require.Equal(t, "95% (760 payments/s of fresh.sql's ceiling 800/s at 1 connections (Little's bound 4000/s)); "+
		"p50 / p99 433 / 1300 ms; non-2xx none, errors 0 (timeouts 0); the service's memory (RSS) 40 MiB before, 120 MiB at most, 90 MiB after",
		got.Measured)

	for i := range r.Points {
		r.Points[i].FreshCeiling.TPS = 9000
	}
	got = manyTarget(r)
	require.False(t, got.Met, "19%% of Little's bound")
	require.Contains(t, got.Measured, "19% (760 payments/s of Little's bound 4000/s (fresh.sql's ceiling 9000/s at 1 connections))")

	r = sample()
	r.Many.Fresh.Errors, r.Many.Fresh.Timeouts = 3, 2
	got = manyTarget(r)
	require.False(t, got.Met)
	require.Contains(t, got.Measured, "errors 3 (timeouts 2)")
	require.Contains(t, find(t, r, "zero errors").Measured, "3 service fresh with 1000 in flight")

	// With the machine's CPU time read around the run, the target says
	// what a payment cost the CPUs and the throughput that leaves them,
	// and the verdict is still the share's.
	r = sample()
	for i := range r.Points {
		r.Points[i].FreshCeiling.TPS = 1300
	}
	r.Machine.CPUs = 2
	r.Many.CPU = &CPUCost{Requests: 9880, Postgres: 1400, Service: 700, Emulator: 250, Load: 150, Rest: 100, Busy: 2600, Idle: 26}
	got = manyTarget(r)
	require.False(t, got.Met, "58% of fresh.sql's ceiling")
	require.Contains(t, got.Measured, "; the machine's CPUs were 99% busy, 2600 µs a payment (Postgres 1400, the service 700, "+
		"the emulator 250, the load generator 150, the rest 100), which bounds 2 CPUs at 769 payments/s; "+
		"the bare service, on the same SQL: 780 payments/s")

	r.Many = nil
	require.Equal(t, "not measured", manyTarget(r).Measured)
}

// TestReadRSS reads this process's resident memory.
func TestReadRSS(t *testing.T) {
	rss, err := readRSS(os.Getpid())
	require.NoError(t, err)
	require.Greater(t, rss, int64(1<<20))
	stop := sampleRSS(os.Getpid(), 10_000_000)
	m := stop()
	require.NotNil(t, m)
	require.GreaterOrEqual(t, m.Peak, m.Before)
	require.Nil(t, sampleRSS(0, 1)())
}

// TestManyMeasurerWaitsOutTheRamp: the point's runs last at least
// ManyWarmup and ManyWindow, and longer when the run's do.
func TestManyMeasurerWaitsOutTheRamp(t *testing.T) {
	m := manyMeasurer(Config{Warmup: 500 * time.Millisecond, Duration: 2 * time.Second, ManyConns: ManyConns})
	require.Equal(t, ManyWarmup, m.cfg.Warmup)
	require.Equal(t, ManyWindow, m.cfg.Duration)
	require.Equal(t, ManyConns, m.conns)
	m = manyMeasurer(Config{Warmup: 5 * time.Second, Duration: 30 * time.Second})
	require.Equal(t, 5*time.Second, m.cfg.Warmup)
	require.Equal(t, 30*time.Second, m.cfg.Duration)
}
