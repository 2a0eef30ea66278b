// Package app assembles paymentsd: the pool, the phase engine with its flows,
// the River workers, the HTTP API, and the HTTP server around them. The CLI
// and the end-to-end tests build the service through it, so both run the
// same wiring.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/api"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/metrics"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/captures"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/phases/refunds"
	"github.com/paymentsd/paymentsd/internal/ratelimit"
	"github.com/paymentsd/paymentsd/internal/webhooks"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// Options are what the service needs besides its pool.
type Options struct {
	Logger       zerolog.Logger
	LeaseTimeout time.Duration
	Stripe       payments.StripeConfig
	Hooks        phases.Hooks
	// ShutdownGrace bounds a graceful shutdown.
	ShutdownGrace time.Duration
	// RequestTimeout bounds one request's work once its key is reserved.
	// It defaults to the lease length, so a run normally gives its key up
	// before another may take it over; fencing covers the runs that do not.
	RequestTimeout time.Duration
	// HeartbeatInterval is how often this instance proves it is alive; its
	// leases are stale after three missed beats.
	HeartbeatInterval time.Duration
	Workers           workers.Config
	// RateLimit is new idempotency keys per second per user, per process;
	// zero turns the limit off.
	RateLimit int
	// MaxUnfinished caps the unfinished keys of one user (default 1000).
	MaxUnfinished int
	// AuthCacheTTL bounds how long a process trusts a cached API key
	// (default 10s; negative turns the cache off).
	AuthCacheTTL time.Duration
	// WebhookSecret, when set, mounts POST /webhooks/stripe, verified with
	// it (STRIPE_WEBHOOK_SECRET).
	WebhookSecret string
	// StaleAt is the engine's clock seam for tests (phases.Config.StaleAt).
	StaleAt func() time.Time
}

// App is an assembled service.
type App struct {
	Pool   *db.Pool
	Engine *phases.Engine
	River  *river.Client[pgx.Tx]
	// Receipts drains the receipt outbox; Run runs it beside River.
	Receipts   *workers.Dispatcher
	Handler    http.Handler
	Metrics    *metrics.Metrics
	InstanceID uuid.UUID
	// Resolver and RefundResolver settle payment and refund keys that
	// await an operator; Resolve picks the one a key needs.
	Resolver       *payments.Resolver
	RefundResolver *refunds.Resolver
	// CaptureResolver settles capture and cancel keys.
	CaptureResolver *captures.Resolver
	opts            Options
	serving         chan struct{}
	engineCfg       phases.Config
	flows           []phases.AnyFlow
	alive           *liveness
	history         *historyWatch
}

// New wires the service over pool.
func New(ctx context.Context, pool *db.Pool, opts Options) (*App, error) {
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 30 * time.Second
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 5 * time.Second
	}
	if opts.Workers.RiverLog == nil {
		opts.Workers.RiverLog = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	opts.Workers.Log = opts.Logger

	instanceID := uuid.New()
	// Keys unfinished for longer than Stripe's idempotency window can only
	// be settled by lookup: they await reconciliation.
	m := metrics.New(pool, payments.StripeIdempotencyWindow)
	engineCfg := phases.Config{
		LeaseTimeout:  opts.LeaseTimeout,
		InstanceID:    instanceID,
		DeadAfter:     3 * opts.HeartbeatInterval,
		Hooks:         opts.Hooks,
		Observer:      m,
		Limit:         ratelimit.New(opts.RateLimit).Take,
		MaxUnfinished: opts.MaxUnfinished,
		StaleAt:       opts.StaleAt,
	}
	engine := phases.New(pool, engineCfg)
	opts.Workers.ObserveResume = func(outcome string) { m.CompleterResumes.WithLabelValues(outcome).Inc() }
	opts.Workers.ObserveReaped = func(n int64) { m.ReapedKeys.Add(float64(n)) }
	opts.Workers.ObserveReceipts = func(delivered, failed int) {
		m.Receipts.WithLabelValues("delivered").Add(float64(delivered))
		m.Receipts.WithLabelValues("failed").Add(float64(failed))
	}
	opts.Stripe.ObserveLookup = func(result string) { m.Reconciliations.WithLabelValues(result).Inc() }
	opts.Stripe.ObserveTrustedSearchLag = func(result string) { m.TrustedSearchLag.WithLabelValues(result).Inc() }
	riverClient, err := workers.NewClient(pool, engine, opts.Workers)
	if err != nil {
		return nil, err
	}
	namespace, err := dbsqlc.New().DeploymentNamespace(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("error reading the deployment's namespace (are migrations applied?): %w", err)
	}
	history := &historyWatch{}
	opts.Stripe.LostHistoryAt, opts.Stripe.LostHistorySeenAt = history.lostAt, history.seenAt
	charger := payments.NewCharger(opts.Stripe)
	receipt := workers.EnqueueReceipt
	refunder := refunds.NewRefunder(charger)
	capturer := captures.NewStripe(charger, func(foundBy string) { m.CapturesOutside.WithLabelValues(foundBy).Inc() })
	endpoints := []api.Endpoint{{
		Method: payments.Method, Pattern: payments.Path, Noun: "payment",
		Flow:   payments.NewFlow(pool, namespace, charger, receipt),
		Decode: payments.Decode,
	}, {
		Method: http.MethodPost, Pattern: payments.Path + "/{id}/refunds", Noun: "refund",
		Flow:   refunds.NewFlow(pool, namespace, refunder),
		Decode: refunds.Decode,
		Admit:  refunds.AdmitRefund(pool),
	}, {
		Method: http.MethodPost, Pattern: payments.Path + "/{id}/capture", Noun: "capture",
		Flow:   captures.NewCaptureFlow(namespace, capturer, receipt),
		Decode: captures.DecodeCapture,
		Admit:  captures.Admit(pool),
	}, {
		Method: http.MethodPost, Pattern: payments.Path + "/{id}/cancel", Noun: "cancel",
		Flow:   captures.NewCancelFlow(namespace, capturer, receipt),
		Decode: captures.DecodeCancel,
		Admit:  captures.Admit(pool),
	}}

	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = engine.LeaseTimeout()
	}
	if opts.Stripe.Timeout >= opts.RequestTimeout {
		return nil, fmt.Errorf("the Stripe timeout (%s) must be shorter than the request timeout (%s)", opts.Stripe.Timeout, opts.RequestTimeout)
	}
	if opts.AuthCacheTTL == 0 {
		opts.AuthCacheTTL = 10 * time.Second
	}
	var hooks *webhooks.Handler
	if opts.WebhookSecret != "" {
		hooks = &webhooks.Handler{
			Pool: pool, Secret: opts.WebhookSecret, Namespace: namespace,
			Payments: &payments.EventSettler{Engine: engine, Receipt: receipt,
				Captures: (&captures.EventSettler{Engine: engine, Receipt: receipt, Namespace: namespace,
					Outside: func(foundBy string) { m.CapturesOutside.WithLabelValues(foundBy).Inc() }}).Settle},
			Refunds: &refunds.EventSettler{Engine: engine},
			Observe: func(eventType, outcome string) { m.WebhookEvents.WithLabelValues(eventType, outcome).Inc() },
		}
	}
	alive := &liveness{deadAfter: engineCfg.DeadAfter}
	server, err := api.NewServer(pool, engine, m, opts.Logger, api.Config{
		RequestTimeout: opts.RequestTimeout,
		AuthCacheTTL:   opts.AuthCacheTTL,
		Webhooks:       hooks,
		Alive:          alive.check,
	}, endpoints...)
	if err != nil {
		return nil, err
	}
	return &App{
		serving:         make(chan struct{}),
		engineCfg:       engineCfg,
		flows:           flowsOf(endpoints),
		Pool:            pool,
		Engine:          engine,
		River:           riverClient,
		Receipts:        workers.NewDispatcher(pool, opts.Workers),
		Handler:         server.Handler(),
		Metrics:         m,
		InstanceID:      instanceID,
		Resolver:        &payments.Resolver{Engine: engine, Charger: charger, Namespace: namespace, Receipt: receipt},
		RefundResolver:  &refunds.Resolver{Engine: engine, Refunder: refunder, Namespace: namespace},
		CaptureResolver: &captures.Resolver{Engine: engine, Stripe: capturer, Receipt: receipt, Namespace: namespace},
		opts:            opts,
		alive:           alive,
		history:         history,
	}, nil
}

// Resolve settles key keyID, which awaits an operator, as charged by the
// Stripe object stripeID (a PaymentIntent for a payment, a Refund for a
// refund, the payment's PaymentIntent, captured, for a capture or cancel)
// or, with an empty stripeID, as not charged (not captured). It returns
// phases.ErrNotAwaitingOperator for a key that does not await one.
func (a *App) Resolve(ctx context.Context, keyID int64, stripeID string) (*phases.Response, error) {
	key, err := dbsqlc.New().IdempotencyKeyGetByID(ctx, a.Pool, keyID)
	if err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, phases.ErrNotAwaitingOperator
		}
		return nil, err
	}
	type resolver interface {
		Charged(ctx context.Context, keyID int64, stripeID string) (*phases.Response, error)
		NotCharged(ctx context.Context, keyID int64) (*phases.Response, error)
	}
	var r resolver
	switch key.Flow {
	case payments.FlowName:
		r = a.Resolver
	case refunds.FlowName:
		r = a.RefundResolver
	case captures.CaptureFlowName, captures.CancelFlowName:
		// "charged" is captured by the payment's PaymentIntent, "not
		// charged" not captured.
		r = a.CaptureResolver
	default:
		return nil, fmt.Errorf("keys of flow %q cannot be resolved by an operator", key.Flow)
	}
	if stripeID == "" {
		return r.NotCharged(ctx, keyID)
	}
	return r.Charged(ctx, keyID, stripeID)
}

// EngineAt is a second engine over the app's database and flows that judges
// leases stale at staleAt: what a process sees once time has passed, for a
// test that would otherwise sleep a lease out.
func (a *App) EngineAt(staleAt func() time.Time) *phases.Engine {
	cfg := a.engineCfg
	cfg.StaleAt = staleAt
	e := phases.New(a.Pool, cfg)
	for _, f := range a.flows {
		if err := e.Register(f); err != nil {
			panic(err) // registered once already: cannot fail
		}
	}
	return e
}

func flowsOf(endpoints []api.Endpoint) []phases.AnyFlow {
	flows := make([]phases.AnyFlow, len(endpoints))
	for i, ep := range endpoints {
		flows[i] = ep.Flow
	}
	return flows
}
