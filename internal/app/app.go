// Package app assembles paymentsd: the pool, the phase engine with its flows,
// the HTTP API, and the HTTP server around them. The CLI and the end-to-end
// tests build the service through it, so both run the same wiring.
package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/api"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
)

// Options are what the service needs besides its pool.
type Options struct {
	Logger        zerolog.Logger
	LeaseTimeout  time.Duration
	Stripe        payments.StripeConfig
	Hooks         phases.Hooks
	ShutdownGrace time.Duration
	// RequestTimeout bounds one request's work once its key is reserved.
	// It defaults to the lease length, so a run normally gives its key up
	// before another may take it over; fencing covers the runs that do not.
	RequestTimeout time.Duration
}

// App is an assembled service.
type App struct {
	Pool    *pgxpool.Pool
	Engine  *phases.Engine
	Handler http.Handler
	opts    Options
}

// New wires the service over pool.
func New(pool *pgxpool.Pool, opts Options) *App {
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 30 * time.Second
	}
	engine := phases.New(pool, phases.Config{LeaseTimeout: opts.LeaseTimeout, Hooks: opts.Hooks})
	engine.Register(payments.Method, payments.Path, payments.NewFlow(pool, payments.NewCharger(opts.Stripe)))
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = engine.LeaseTimeout()
	}
	server := api.NewServer(pool, engine, opts.Logger, api.Config{RequestTimeout: opts.RequestTimeout})
	return &App{Pool: pool, Engine: engine, Handler: server.Handler(), opts: opts}
}

// Serve answers HTTP on ln until ctx is done, then stops taking requests and
// waits up to the shutdown grace for those in flight.
func (a *App) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           a.Handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      a.opts.RequestTimeout + 15*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          nil,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	a.opts.Logger.Info().Dur("grace", a.opts.ShutdownGrace).Msg("shutting down: no new requests, waiting for those in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), a.opts.ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serveErr := <-errc; !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}
