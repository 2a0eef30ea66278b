package bench

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPairedInterval(t *testing.T) {
	// Shares 0.9, 1.0, 0.95, 0.95: mean 0.95, sample sd 0.0408, t(3) 3.182.
	shares, lo, hi, ok := pairedInterval([]float64{90, 100, 95, 95}, []float64{100, 100, 100, 100})
	require.True(t, ok)
	require.Equal(t, []float64{0.9, 1, 0.95, 0.95}, shares)
	require.InDelta(t, 0.95-3.182*0.040825/2, lo, 1e-4)
	require.InDelta(t, 0.95+3.182*0.040825/2, hi, 1e-4)

	// Equal shares in every pair: no spread, the interval is the share.
	_, lo, hi, ok = pairedInterval([]float64{90, 180}, []float64{100, 200})
	require.True(t, ok)
	require.InDelta(t, 0.9, lo, 1e-12)
	require.InDelta(t, 0.9, hi, 1e-12)

	for _, c := range [][2][]float64{{{90}, {100}}, {{90, 95}, {100}}, {{90, 95}, {100, 0}}} {
		_, _, _, ok := pairedInterval(c[0], c[1])
		require.False(t, ok, "%v", c)
	}
}

func TestIndependentInterval(t *testing.T) {
	// Means 95 and 100, each with a sample sd of 5.77 over four runs: the
	// relative standard errors (sd/mean/√4) add in quadrature, and with
	// spreads this alike Welch's degrees of freedom are 5 (5.98, rounded
	// down), t 2.571.
	lo, hi, ok := independentInterval([]float64{90, 100, 90, 100}, []float64{95, 105, 95, 105})
	require.True(t, ok)
	sd := math.Sqrt(100.0 / 3)
	half := 2.571 * 0.95 * math.Hypot(sd/95/2, sd/100/2)
	require.InDelta(t, 0.95-half, lo, 1e-9)
	require.InDelta(t, 0.95+half, hi, 1e-9)

	// All the spread on one side: Welch's degrees of freedom are that
	// side's, 3 (t 3.182), not 6.
	lo, hi, ok = independentInterval([]float64{90, 100, 90, 100}, []float64{100, 100, 100, 100})
	require.True(t, ok)
	half = 3.182 * 0.95 * sd / 95 / 2
	require.InDelta(t, 0.95-half, lo, 1e-9)
	require.InDelta(t, 0.95+half, hi, 1e-9)

	_, _, ok = independentInterval([]float64{90}, []float64{100, 100})
	require.False(t, ok)
}

func TestTQuantile(t *testing.T) {
	require.Equal(t, 12.706, tQuantile(1))
	require.Equal(t, 3.182, tQuantile(3))
	require.Equal(t, 2.228, tQuantile(11), "between tabled values, the lower degrees' (wider)")
	require.Equal(t, 1.980, tQuantile(1000))
}

func TestIntervalText(t *testing.T) {
	require.Equal(t, "91–99%", intervalText(0.913, 0.987, 0.9))
	require.Equal(t, "84–95%, which holds 90%: this run cannot tell met from not met", intervalText(0.84, 0.95, 0.9))
	require.Equal(t, "80–88%", intervalText(0.80, 0.88, 0.9))
}
