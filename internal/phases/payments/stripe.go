package payments

import (
	"net"
	"net/http"
	"time"

	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/paymentsd/paymentsd/internal/stripeonce"
)

// StripeIdempotencyWindow is how long Stripe keeps an idempotency key. A
// create sent later than this under an old key could be a second charge, so
// near its end the charge only looks the PaymentIntent up.
const StripeIdempotencyWindow = stripeonce.Window

// StripeConfig configures the Stripe client and the rules by which an
// unknown outcome is settled. Each duration's comment ends with its default.
type StripeConfig struct {
	SecretKey string
	// APIBase overrides Stripe's URL (the emulator, stripe-mock).
	APIBase string
	// Timeout bounds every Stripe call. Defaults to 30s.
	Timeout time.Duration
	// MaxConnsPerHost sizes the keep-alive pool to Stripe: about the
	// number of charges in flight at once. Defaults to 64.
	MaxConnsPerHost int
	// ExecutionBound is the longest Stripe is assumed to keep executing a
	// request after it was sent, whether or not we still wait for the
	// answer. Stripe documents no figure; this one is deliberately
	// generous. Defaults to 10m.
	ExecutionBound time.Duration
	// VisibilityMargin is how long after Stripe finished a write a list is
	// trusted to show it (lists are strongly consistent; the margin covers
	// clock skew between us and Stripe too). Defaults to 1m.
	VisibilityMargin time.Duration
	// SearchLag and LookupLookback: see stripeonce.Rules. Default to 1h
	// and 10m.
	SearchLag      time.Duration
	LookupLookback time.Duration
	// LookupGrace is how long past Stripe's idempotency window a key whose
	// lookups keep failing waits before it is handed to an operator.
	// Defaults to 24h.
	LookupGrace time.Duration
	// LostHistoryAt, LostHistorySeenAt and LostHistoryHorizon: see
	// stripeonce.Rules.
	LostHistoryAt      func() time.Time
	LostHistorySeenAt  func() time.Time
	LostHistoryHorizon time.Duration
	// ObserveLookup, when set, is told the result of every lookup:
	// adopted, not_found, not_created or needs_attention.
	ObserveLookup func(result string)
	// ObserveTrustedSearchLag: see stripeonce.Rules.
	ObserveTrustedSearchLag func(result string)
}

func (c *StripeConfig) setDefaults() {
	defaultTo := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defaultTo(&c.Timeout, 30*time.Second)
	defaultTo(&c.ExecutionBound, 10*time.Minute)
	defaultTo(&c.VisibilityMargin, time.Minute)
	defaultTo(&c.LookupGrace, 24*time.Hour)
	if c.MaxConnsPerHost <= 0 {
		c.MaxConnsPerHost = 64
	}
	if c.ObserveLookup == nil {
		c.ObserveLookup = func(string) {}
	}
}

// Charger charges payments through stripe-go.
type Charger struct {
	api      *client.API
	cfg      StripeConfig
	rules    stripeonce.Rules
	searches *searchPool
}

// NewCharger returns a Charger. stripe-go's own retries are off: the phase
// engine retries with the same idempotency key, on its own schedule.
func NewCharger(cfg StripeConfig) *Charger {
	cfg.setDefaults()
	clock := &stripeClock{next: transport(cfg.MaxConnsPerHost)}
	backendCfg := &stripe.BackendConfig{
		MaxNetworkRetries: stripe.Int64(0),
		HTTPClient:        &http.Client{Timeout: cfg.Timeout, Transport: clock},
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.APIBase != "" {
		backendCfg.URL = stripe.String(cfg.APIBase)
	}
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, backendCfg)
	api := client.New(cfg.SecretKey, &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
	return &Charger{
		api:      api,
		cfg:      cfg,
		searches: newSearchPool(api, cfg.Timeout),
		rules: stripeonce.Rules{
			ExecutionBound: cfg.ExecutionBound, VisibilityMargin: cfg.VisibilityMargin,
			LookupGrace: cfg.LookupGrace, SearchLag: cfg.SearchLag, LookupLookback: cfg.LookupLookback, Observe: cfg.ObserveLookup,
			ObserveTrustedSearchLag: cfg.ObserveTrustedSearchLag,
			StripeOffset:            clock.Offset, LostHistoryAt: cfg.LostHistoryAt, LostHistorySeenAt: cfg.LostHistorySeenAt,
			LostHistoryHorizon: cfg.LostHistoryHorizon,
		}.WithDefaults(),
	}
}

// transport keeps up to conns idle connections to Stripe, so charges in
// flight at once reuse their TLS sessions instead of dialling anew (Go's
// default keeps two per host).
func transport(conns int) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          conns,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Client is the stripe-go client the charger uses, for other flows that
// call Stripe (refunds) to share its connections and settings.
func (c *Charger) Client() *client.API { return c.api }

// Rules are the exactly-once rules the charger follows, for other flows to
// follow too.
func (c *Charger) Rules() stripeonce.Rules { return c.rules }

// Timeout bounds every Stripe call.
func (c *Charger) Timeout() time.Duration { return c.cfg.Timeout }
