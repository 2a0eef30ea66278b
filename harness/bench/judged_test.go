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
