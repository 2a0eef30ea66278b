package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestAbbaSidesOrder runs three sides at TargetConns and checks the order:
// as given, then reversed, and so on, each side's runs combined in the
// order they ran; at another connection count the single runs stand.
func TestAbbaSidesOrder(t *testing.T) {
	t.Parallel()
	var order []string
	side := func(name string, throughput float64) func() (measured, error) {
		return func() (measured, error) {
			order = append(order, name)
			return measured{Load: Load{Throughput: throughput, OK: 1, Total: 1}, window: time.Second, name: name,
				latencies: []time.Duration{time.Millisecond}}, nil
		}
	}
	a, b, c := side("a", 1), side("b", 2), side("c", 3)

	m := &measurer{conns: TargetConns}
	loads, err := m.runSides(a, b, c)
	require.NoError(t, err)
	want := strings.Repeat("abc"+"cba", JudgedRuns/2)
	require.Equal(t, want, strings.Join(order, ""))
	require.Len(t, loads, 3)
	for i, l := range loads {
		require.Len(t, l.Runs, JudgedRuns)
		require.InDelta(t, float64(i+1), l.Runs[0], 1e-9, "side %d's runs stay its own", i)
	}

	order = nil
	m = &measurer{conns: 1}
	loads, err = m.runSides(a, b, c)
	require.NoError(t, err)
	require.Equal(t, "abc", strings.Join(order, ""))
	require.Empty(t, loads[2].Runs)
	require.InDelta(t, 3.0, loads[2].Throughput, 1e-9)
}

// TestCombineCeilings reads runs of a script as one: transactions over
// their time, percentiles over every latency, each run's throughput kept.
func TestCombineCeilings(t *testing.T) {
	t.Parallel()
	lat := func(ms ...int) []time.Duration {
		var d []time.Duration
		for _, v := range ms {
			d = append(d, time.Duration(v)*time.Millisecond)
		}
		return d
	}
	c := combineCeilings(
		Ceiling{TPS: 100, Transactions: 200, latencies: lat(1, 2)},
		Ceiling{TPS: 300, Transactions: 600, latencies: lat(3, 4, 100)},
	)
	require.InDelta(t, 200.0, c.TPS, 1e-9, "800 transactions in 2 s + 2 s")
	require.Equal(t, 800, c.Transactions)
	require.Equal(t, []float64{100, 300}, c.Runs)
	require.InDelta(t, 3.0, c.P50, 1e-9)
	require.InDelta(t, 100.0, c.P99, 1e-9)
}

// TestLeastCeilingTargetShowsItsRounds: the ceiling target of combined
// runs gives each round's throughput and the interval of their shares.
func TestLeastCeilingTargetShowsItsRounds(t *testing.T) {
	t.Parallel()
	r := sample()
	p := &r.Points[2]
	p.FreshCeiling = Ceiling{TPS: 800, Transactions: 1600, Runs: []float64{790, 810}}
	p.LeastCeiling = Ceiling{TPS: 1000, Transactions: 2000, Runs: []float64{1000, 1000}}
	got := find(t, r, "own SQL ceiling")
	require.True(t, got.Met)
	require.Contains(t, got.Measured, "80% (800 of 1000 payments/s); runs (ABBA): fresh.sql 790 and 810, least.sql 1000 and 1000; the pairs' shares 79% and 81%")
}
