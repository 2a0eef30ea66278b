package metrics

import (
	"strconv"
	"time"
)

// ObserveRequest counts an answered HTTP request by route pattern, method
// and status, and observes how long it took by route. The callers bound the
// label values (route patterns, the methods HTTP defines, status codes).
func (m *Metrics) ObserveRequest(route, method string, status int, took time.Duration) {
	m.HTTPRequests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.HTTPDuration.WithLabelValues(route).Observe(took.Seconds())
}

// Outcome counts an idempotent request's outcome in flow (one of the
// Outcome constants).
func (m *Metrics) Outcome(flow, outcome string) {
	m.IdempotencyOutcomes.WithLabelValues(flow, outcome).Inc()
}
