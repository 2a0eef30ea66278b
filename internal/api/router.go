package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	apispec "github.com/paymentsd/paymentsd/api"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/metrics"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/problem"
	"github.com/paymentsd/paymentsd/internal/webhooks"
)

// Config tunes the HTTP layer.
type Config struct {
	// RequestTimeout bounds the work of one request once its key is
	// reserved, independently of the client.
	RequestTimeout time.Duration
	// AuthCacheTTL is how long a process trusts a cached API key lookup;
	// zero turns the cache off.
	AuthCacheTTL time.Duration
	// Webhooks, when set, serves POST /webhooks/stripe (no bearer auth:
	// Stripe's signature authenticates it).
	Webhooks *webhooks.Handler
	// Alive, when set, says why the store cannot commit (nil when it can):
	// /readyz answers 503 store-unavailable while it does.
	Alive func() error
}

// Server holds what the handlers share.
type Server struct {
	endpoints []*Endpoint
	pool      *db.Pool
	engine    *phases.Engine
	metrics   *metrics.Metrics
	auth      *authCache
	queries   *dbsqlc.Queries
	log       zerolog.Logger
	cfg       Config
}

// NewServer returns the API over pool and engine, serving the idempotent
// endpoints given: each one's flow is registered with the engine here, so a
// malformed or duplicate flow stops the service from starting.
func NewServer(pool *db.Pool, engine *phases.Engine, m *metrics.Metrics, log zerolog.Logger, cfg Config,
	endpoints ...Endpoint) (*Server, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = time.Minute
	}
	s := &Server{
		pool: pool, engine: engine, metrics: m, queries: dbsqlc.New(), log: log, cfg: cfg,
		auth: newAuthCache(cfg.AuthCacheTTL, 10_000),
	}
	for _, ep := range endpoints {
		if err := engine.Register(ep.Flow); err != nil {
			return nil, fmt.Errorf("error mounting %s %s: %w", ep.Method, ep.Pattern, err)
		}
		m.StartFlow(ep.Flow.FlowName())
		s.endpoints = append(s.endpoints, &ep)
	}
	return s, nil
}

// Handler is the router with every route and middleware.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.accessLog, s.recoverPanic)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeProblem(w, problem.New(problem.NotFound, "No such resource."))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowedMethods(r, req.URL.Path))
		writeProblem(w, problem.New(problem.MethodNotAllowed, "The resource does not support this method."))
	})

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Method(http.MethodGet, "/metrics", s.metrics.Handler())
	r.Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(apispec.OpenAPI)
	})
	if s.cfg.Webhooks != nil {
		r.Post("/webhooks/stripe", s.stripeWebhook)
	}
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate)
		for _, ep := range s.endpoints {
			r.Method(ep.Method, ep.Pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				s.serveIdempotent(ep, w, r)
			}))
		}
		r.Get(payments.Path, s.listPayments)
		r.Get(payments.Path+"/{id}", s.getPayment)
		r.Get(payments.Path+"/{id}/refunds", s.listRefunds)
		r.Get("/refunds/{id}", s.getRefund)
	})
	return r
}

// allowedMethods lists the methods routes serves for path, for the Allow
// header that RFC 9110 requires on a 405.
func allowedMethods(routes chi.Routes, path string) string {
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if routes.Match(chi.NewRouteContext(), m, path) {
			allowed = append(allowed, m)
		}
	}
	return strings.Join(allowed, ", ")
}

// writeJSON answers with v encoded as JSON, ending with a newline like
// every JSON answer that is not a stored response (those are replayed
// byte for byte as they were stored).
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeProblem(w, problem.New(problem.InternalError, "An unexpected error occurred."))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
