package bench

import (
	"fmt"
	"math"
)

// # How far a share can be trusted
//
// A judged share is the service's runs read as one against the bare's (or
// the filled point's against the empty database's), and on two shared cores
// single runs of the same code drift by several percent. So beside the
// share the targets give a 95% interval for it, from the runs themselves:
// for a judged pair, from the share in each of its pairs (run i of each
// side ran in the same pair, one right after the other); for the filled
// point against the empty database, whose runs are apart, from each side's
// runs as independent samples. An interval that holds the target's share
// says this run cannot tell met from not met; the verdict stays the
// share's own.

// pairedInterval is the 95% interval of the mean share of a's runs in b's,
// run i of each side from the same pair, and those shares; ok is false
// with fewer than two pairs. (The mean of the pairs' shares is close to
// the judged share, the runs read as one, but not equal to it.)
func pairedInterval(a, b []float64) (shares []float64, lo, hi float64, ok bool) {
	if len(a) < 2 || len(a) != len(b) {
		return nil, 0, 0, false
	}
	for i := range a {
		if b[i] <= 0 {
			return nil, 0, 0, false
		}
		shares = append(shares, a[i]/b[i])
	}
	lo, hi = meanInterval(shares)
	return shares, lo, hi, true
}

// meanInterval is the 95% interval of the mean of xs (two or more), by
// Student's t.
func meanInterval(xs []float64) (lo, hi float64) {
	mean, sd := meanSD(xs)
	half := tQuantile(len(xs)-1) * sd / math.Sqrt(float64(len(xs)))
	return mean - half, mean + half
}

// independentInterval is the 95% interval of mean(a)/mean(b) with the runs
// of each side independent samples: the delta method (the relative
// standard errors add in quadrature), with Welch's degrees of freedom,
// since the two sides' spreads need not be equal; ok is false with fewer
// than two runs a side. It cannot see a shift that moves all of one side's
// runs alike, as the filled point's, minutes after the empty database's,
// can be.
func independentInterval(a, b []float64) (lo, hi float64, ok bool) {
	if len(a) < 2 || len(b) < 2 {
		return 0, 0, false
	}
	ma, sa := meanSD(a)
	mb, sb := meanSD(b)
	if ma <= 0 || mb <= 0 {
		return 0, 0, false
	}
	// The squared relative standard errors; without any spread the
	// interval is the share itself, whatever t is.
	va, vb := sa*sa/(ma*ma*float64(len(a))), sb*sb/(mb*mb*float64(len(b)))
	df := 1
	if va+vb > 0 {
		df = int((va + vb) * (va + vb) / (va*va/float64(len(a)-1) + vb*vb/float64(len(b)-1)))
	}
	r := ma / mb
	half := tQuantile(df) * math.Sqrt(va+vb) * r
	return r - half, r + half, true
}

// meanSD is the mean and the sample standard deviation of xs (two or more).
func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(xs)-1))
}

// tTable is Student's t for a two-sided 95% interval, by degrees of
// freedom.
var tTable = []struct {
	df int
	t  float64
}{{1, 12.706}, {2, 4.303}, {3, 3.182}, {4, 2.776}, {5, 2.571}, {6, 2.447}, {7, 2.365}, {8, 2.306},
	{9, 2.262}, {10, 2.228}, {12, 2.179}, {14, 2.145}, {16, 2.120}, {20, 2.086}, {30, 2.042}, {60, 2.000}, {120, 1.980}}

// tQuantile is tTable's t for df degrees of freedom; between the tabled
// ones, the next lower's (a wider interval).
func tQuantile(df int) float64 {
	t := tTable[0].t
	for _, row := range tTable {
		if df >= row.df {
			t = row.t
		}
	}
	return t
}

// pairInterval is what the targets add for a judged pair: each pair's share
// and the interval, "; the pairs' shares 89%, 94%, 84% and 90%, 95%
// interval 83–96%", flagged when it holds least; empty for single runs.
func pairInterval(svc, bare Load, least float64) string {
	shares, lo, hi, ok := pairedInterval(svc.Runs, bare.Runs)
	if !ok {
		return ""
	}
	return fmt.Sprintf("; the pairs' shares %s, 95%% interval %s", listOf(shares, "%.0f%%", 100), intervalText(lo, hi, least))
}

// filledInterval is what the filled targets add: the interval of the filled
// runs' share of the empty database's, flagged when it holds least.
func filledInterval(filled, empty Load, least float64) string {
	lo, hi, ok := independentInterval(filled.Runs, empty.Runs)
	if !ok {
		return ""
	}
	return fmt.Sprintf("; 95%% interval %s", intervalText(lo, hi, least))
}

// intervalText is "83–96%", with ", which holds 90%: this run cannot tell"
// when least lies inside it.
func intervalText(lo, hi, least float64) string {
	s := fmt.Sprintf("%.0f–%.0f%%", 100*lo, 100*hi)
	if lo <= least && least <= hi {
		s += fmt.Sprintf(", which holds %.0f%%: this run cannot tell met from not met", 100*least)
	}
	return s
}
