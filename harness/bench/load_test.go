package bench

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runOf is a run of window whose window saw, for each latency in ms, that
// many successes, handed over out of order as the workers' tallies are.
func runOf(window time.Duration, total, unexpected, errors int, nonOK map[int]int, latencies map[float64]int) measured {
	rec := &recorder{total: total, unexpected: unexpected, errors: errors, nonOK: nonOK}
	for latency, n := range latencies {
		for range n {
			rec.latencies = append(rec.latencies, time.Duration(latency*float64(time.Millisecond)))
		}
	}
	return merge([]*recorder{rec}, window)
}

// TestCombineReadsRunsAsOne: two runs of a side are one Load whose
// throughput is the answers inside both windows over their sum, not the
// mean of the two throughputs, whose percentiles are over both runs'
// latencies together, not either run's nor their mean, and whose counts
// are summed; each run's own throughput is kept.
func TestCombineReadsRunsAsOne(t *testing.T) {
	a := runOf(10*time.Second, 120, 1, 2, map[int]int{409: 1, 500: 2}, map[float64]int{1: 97, 50: 3})
	b := runOf(20*time.Second, 330, 0, 3, map[int]int{500: 1}, map[float64]int{2: 297, 20: 3})
	require.Equal(t, 10.0, a.Throughput)
	require.Equal(t, 15.0, b.Throughput)
	require.Equal(t, 50.0, a.P99)
	require.Equal(t, 2.0, b.P99)

	l := combine(a, b)
	require.InDelta(t, 400.0/30, l.Throughput, 1e-9, "400 answers over 30 s, not the mean 12.5")
	require.Equal(t, 2.0, l.P50, "the 200th of 400: 97 at 1 ms, 297 at 2 ms")
	require.Equal(t, 20.0, l.P99, "the 396th of 400: 3 at 50 ms above it")
	require.Equal(t, 400, l.OK)
	require.Equal(t, 450, l.Total)
	require.Equal(t, map[int]int{409: 1, 500: 3}, l.NonOK)
	require.Equal(t, 1, l.Unexpected)
	require.Equal(t, 5, l.Errors)
	require.Equal(t, []float64{10, 15}, l.Runs)
	require.Equal(t, 9, l.Failures(), "1 unexpected, 5 transport errors, 3 500s")
	require.Equal(t, 1, l.Conflicts())

	// The runs stay as they were, and a single run is not a combined one.
	require.Equal(t, 100, a.OK)
	require.Empty(t, a.Runs)
}
