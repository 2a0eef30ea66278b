package metrics

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// Each request and outcome is counted in the series of its labels, exactly,
// under concurrent use, one series per label set.
func TestSeriesCountWhatWithLabelValuesReads(t *testing.T) {
	m := New(nil, time.Minute) // the pool is read only at scrape time
	const goroutines, each = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			status := 201
			if g%2 == 1 {
				status = 409
			}
			for range each {
				m.ObserveRequest("/payments", "POST", status, 3*time.Millisecond)
				m.Outcome("payment", OutcomeReplayed)
			}
		})
	}
	wg.Wait()
	m.ObserveRequest("/payments/{id}", "GET", 404, time.Second)
	m.ObserveRequest("/payments", "GET", 201, time.Second) // the method alone differs
	m.Outcome("payment", OutcomeCreated)                   // the outcome alone differs
	m.Outcome("refund", OutcomeReplayed)                   // the flow alone differs
	m.Outcome("refund", OutcomeReplayed)

	require.Equal(t, float64(goroutines/2*each), testutil.ToFloat64(m.HTTPRequests.WithLabelValues("/payments", "POST", "201")))
	require.Equal(t, float64(goroutines/2*each), testutil.ToFloat64(m.HTTPRequests.WithLabelValues("/payments", "POST", "409")))
	require.Equal(t, float64(1), testutil.ToFloat64(m.HTTPRequests.WithLabelValues("/payments/{id}", "GET", "404")))
	require.Equal(t, float64(1), testutil.ToFloat64(m.HTTPRequests.WithLabelValues("/payments", "GET", "201")))
	require.Equal(t, 4, testutil.CollectAndCount(m.HTTPRequests), "one series per label set")
	require.Equal(t, float64(goroutines*each), testutil.ToFloat64(m.IdempotencyOutcomes.WithLabelValues("payment", OutcomeReplayed)))
	require.Equal(t, float64(1), testutil.ToFloat64(m.IdempotencyOutcomes.WithLabelValues("payment", OutcomeCreated)))
	require.Equal(t, float64(2), testutil.ToFloat64(m.IdempotencyOutcomes.WithLabelValues("refund", OutcomeReplayed)))

	durations := histogram(t, m.HTTPDuration.WithLabelValues("/payments"))
	require.Equal(t, uint64(goroutines*each+1), durations.GetSampleCount(), "by route: the GET's too")
	require.InDelta(t, goroutines*each*0.003+1, durations.GetSampleSum(), 1e-6)
	require.Equal(t, uint64(1), histogram(t, m.HTTPDuration.WithLabelValues("/payments/{id}")).GetSampleCount())
}

func histogram(t *testing.T, o prometheus.Observer) *dto.Histogram {
	t.Helper()
	var out dto.Metric
	require.NoError(t, o.(prometheus.Metric).Write(&out))
	return out.GetHistogram()
}

func BenchmarkObserveReplay(b *testing.B) {
	m := New(nil, time.Minute)
	for b.Loop() {
		m.ObserveRequest("/payments", "POST", 201, 1500*time.Microsecond)
		m.Outcome("payment", OutcomeReplayed)
	}
}
