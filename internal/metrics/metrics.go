// Package metrics defines paymentsd's Prometheus metrics. Each App owns its
// own registry, so several services can live in one test process.
package metrics

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// Idempotency outcomes, the values of the outcome label.
const (
	OutcomeCreated     = "created"
	OutcomeReplayed    = "replayed"
	OutcomeInProgress  = "in_progress"
	OutcomeKeyReused   = "key_reused"
	OutcomeAmbiguous   = "ambiguous"
	OutcomeStoreError  = "store_error"
	OutcomeLeaseLost   = "lease_lost"
	OutcomeRateLimited = "rate_limited"
	// OutcomeTooManyUnfinished is the per-user cap on unfinished keys (429).
	OutcomeTooManyUnfinished = "too_many_unfinished"
	// OutcomeKeyExpired is a retry of a reaped key (422).
	OutcomeKeyExpired = "key_expired"
	// OutcomeNeedsAttention is a key parked for an operator (503).
	OutcomeNeedsAttention = "needs_attention"
	// OutcomeInternalError is a bug: an error nothing above knows (500).
	OutcomeInternalError = "internal_error"
	// OutcomeClientClosed is a client that hung up before its request was
	// admitted, so that the request was canceled: nothing was stored, and
	// the status recorded is 499, the one nginx gives it.
	OutcomeClientClosed = "client_closed"
)

// Metrics holds every metric the service exports.
type Metrics struct {
	Registry *prometheus.Registry

	// HTTPRequests, HTTPDuration and IdempotencyOutcomes are counted into
	// through ObserveRequest and Outcome (series.go).
	HTTPRequests        *prometheus.CounterVec
	HTTPDuration        *prometheus.HistogramVec
	IdempotencyOutcomes *prometheus.CounterVec
	PhaseDuration       *prometheus.HistogramVec
	LeaseTakeovers      prometheus.Counter
	KeysParked          prometheus.Counter
	CompleterResumes    *prometheus.CounterVec
	Reconciliations     *prometheus.CounterVec
	// TrustedSearchLag counts the lookups among Reconciliations whose
	// "nothing found" rests on Stripe's search lagging by no more than
	// the SearchLag assumed (see stripeonce.Rules).
	TrustedSearchLag *prometheus.CounterVec
	ReapedKeys       prometheus.Counter
	Receipts         *prometheus.CounterVec
	WebhookEvents    *prometheus.CounterVec
	// CapturesOutside counts authorizations found captured by no key of
	// paymentsd (see captures.ObserveOutside): an alarm.
	CapturesOutside *prometheus.CounterVec
}

// New registers the metrics, plus gauges read from pool at scrape time:
// the age of the oldest unfinished key and the keys awaiting reconciliation
// (unfinished for longer than reconcileAfter).
func New(pool *db.Pool, reconcileAfter time.Duration) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paymentsd_http_requests_total",
			Help: "HTTP requests answered, by route pattern, method and status code.",
		}, []string{"route", "method", "status"}),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "paymentsd_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route pattern.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
		IdempotencyOutcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paymentsd_idempotency_outcomes_total",
			Help: "What became of idempotent requests, by flow: created, replayed, in_progress (409), key_reused (422), key_expired (422), ambiguous (503), store_error (503), lease_lost (409), rate_limited (429), too_many_unfinished (429), needs_attention (503, parked for an operator), internal_error (500), client_closed (499: the client hung up before its request was admitted; nothing stored).",
		}, []string{"flow", "outcome"}),
		PhaseDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "paymentsd_phase_duration_seconds",
			Help:    "Duration of atomic phases: kind=tx for a phase transaction (labelled with the recovery point it reached), kind=call for a foreign call (labelled with the point it leaves).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"kind", "recovery_point"}),
		LeaseTakeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paymentsd_lease_takeovers_total",
			Help: "Leases taken over from a stale run (timed out, or its instance stopped heartbeating).",
		}),
		KeysParked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paymentsd_keys_needing_attention_total",
			Help: "Keys parked for an operator because no machine could settle their outcome (see paymentsd keys list --state needs-attention).",
		}),
		CompleterResumes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paymentsd_completer_resumes_total",
			Help: "Keys the completer tried to resume, by outcome.",
		}, []string{"outcome"}),
		Reconciliations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paymentsd_reconciliations_total",
			Help: "Lookups of a PaymentIntent by metadata after an unknown outcome, by result: adopted, not_found (a new attempt key may follow), not_created (nothing created, proven at the end of Stripe's window), needs_attention (handed to an operator).",
		}, []string{"result"}),
		TrustedSearchLag: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paymentsd_lookups_trusting_search_lag_total",
			Help: "Lookups that found nothing (result not_found or not_created) while Stripe's search alone covered part of the time since the key was made: each rests on search lagging by no more than the assumed SearchLag (1h), which Stripe does not document. See docs/operations.md, Search lag.",
		}, []string{"result"}),
		WebhookEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paymentsd_webhook_events_total",
			Help: "Verified Stripe events, by type and outcome: applied, ignored (recorded with the reason), duplicate, alarm (contradicts what is recorded, or could not be applied: an operator must look; stripe_events holds the reason).",
		}, []string{"type", "outcome"}),
		ReapedKeys: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paymentsd_reaped_keys_total",
			Help: "Finished idempotency keys deleted after their retention.",
		}),
		CapturesOutside: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paymentsd_captures_outside_total",
			Help: "Alarm: authorizations found captured outside paymentsd (the PaymentIntent succeeded with no paymentsd_capture_intent metadata: the Dashboard, another integration), by who found it: capture, cancel (a run of that key), webhook, operator. Recorded as Stripe says, answered to no key as its own; an operator must look.",
		}, []string{"found_by"}),
		Receipts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paymentsd_receipts_total",
			Help: "Receipt deliveries from the outbox, by outcome: delivered, failed (kept in the outbox and retried with a backoff).",
		}, []string{"outcome"}),
	}
	reg.MustRegister(m.HTTPRequests, m.HTTPDuration, m.IdempotencyOutcomes, m.PhaseDuration,
		m.LeaseTakeovers, m.KeysParked, m.CompleterResumes, m.Reconciliations, m.TrustedSearchLag, m.ReapedKeys, m.Receipts, m.WebhookEvents,
		m.CapturesOutside,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&keyCollector{pool: pool, reconcileAfter: reconcileAfter})
	// Start every known series at zero, so dashboards and alerts see it
	// before the first event.
	for _, o := range []string{"finished", "already_finished", "in_progress", "ambiguous", "needs_attention", "error", "panic"} {
		m.CompleterResumes.WithLabelValues(o)
	}
	for _, o := range []string{"delivered", "failed"} {
		m.Receipts.WithLabelValues(o)
	}
	for _, f := range []string{"capture", "cancel", "webhook", "operator"} {
		m.CapturesOutside.WithLabelValues(f)
	}
	for _, r := range []string{"adopted", "not_found", "not_created", "needs_attention"} {
		m.Reconciliations.WithLabelValues(r)
	}
	for _, r := range []string{"not_found", "not_created"} {
		m.TrustedSearchLag.WithLabelValues(r)
	}
	return m
}

// StartFlow starts the outcome series of a flow at zero.
func (m *Metrics) StartFlow(flow string) {
	for _, o := range []string{OutcomeCreated, OutcomeReplayed, OutcomeInProgress, OutcomeKeyReused,
		OutcomeAmbiguous, OutcomeStoreError, OutcomeLeaseLost, OutcomeRateLimited,
		OutcomeTooManyUnfinished, OutcomeKeyExpired, OutcomeNeedsAttention, OutcomeInternalError, OutcomeClientClosed} {
		m.IdempotencyOutcomes.WithLabelValues(flow, o)
	}
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

var (
	oldestDesc = prometheus.NewDesc("paymentsd_oldest_unfinished_key_age_seconds",
		"Age of the oldest unfinished idempotency key (0 when none).", nil, nil)
	unfinishedDesc = prometheus.NewDesc("paymentsd_unfinished_keys",
		"Idempotency keys not yet finished.", nil, nil)
	reconcileDesc = prometheus.NewDesc("paymentsd_keys_awaiting_reconciliation",
		"Unfinished keys older than the reconciliation threshold: their outcome needs a lookup or an operator.", nil, nil)
	attentionDesc = prometheus.NewDesc("paymentsd_keys_needing_attention",
		"Unfinished keys parked for an operator: never charged again automatically until paymentsd keys resolve settles them.", nil, nil)
)

// keyCollector reads the unfinished-key gauges from Postgres at scrape time.
type keyCollector struct {
	pool           *db.Pool
	reconcileAfter time.Duration
}

func (c *keyCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- oldestDesc
	ch <- unfinishedDesc
	ch <- reconcileDesc
	ch <- attentionDesc
}

func (c *keyCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	stats, err := dbsqlc.New().IdempotencyKeyUnfinishedStats(ctx, c.pool, c.reconcileAfter.Seconds())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(oldestDesc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, stats.OldestAgeSeconds)
	ch <- prometheus.MustNewConstMetric(unfinishedDesc, prometheus.GaugeValue, float64(stats.Unfinished))
	ch <- prometheus.MustNewConstMetric(reconcileDesc, prometheus.GaugeValue, float64(stats.AwaitingReconciliation))
	ch <- prometheus.MustNewConstMetric(attentionDesc, prometheus.GaugeValue, float64(stats.NeedsAttention))
}

// PhaseCommitted implements phases.Observer.
func (m *Metrics) PhaseCommitted(point phases.RecoveryPoint, took time.Duration) {
	m.PhaseDuration.WithLabelValues("tx", string(point)).Observe(took.Seconds())
}

// CallDone implements phases.Observer.
func (m *Metrics) CallDone(point phases.RecoveryPoint, took time.Duration) {
	m.PhaseDuration.WithLabelValues("call", string(point)).Observe(took.Seconds())
}

// LeaseTakenOver implements phases.Observer.
func (m *Metrics) LeaseTakenOver() { m.LeaseTakeovers.Inc() }

// NeedsAttention implements phases.Observer.
func (m *Metrics) NeedsAttention() { m.KeysParked.Inc() }
