package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// Run registers the instance, starts the workers and answers HTTP on ln
// until ctx is done. Then it shuts down gracefully: no new requests,
// in-flight requests and jobs finish (each bounded, and a run that cannot
// finish releases its lease), and the instance deregisters so any lease it
// still holds is stale at once. The whole shutdown is bounded by the grace.
func (a *App) Run(ctx context.Context, ln net.Listener) error {
	if err := a.register(ctx); err != nil {
		return err
	}
	beatCtx, stopBeat := context.WithCancel(context.Background())
	defer stopBeat()
	go a.heartbeat(beatCtx)

	if err := a.River.Start(ctx); err != nil {
		return fmt.Errorf("error starting workers: %w", err)
	}
	receiptsCtx, stopReceipts := context.WithCancel(ctx)
	defer stopReceipts()
	receiptsDone := make(chan struct{})
	go func() { defer close(receiptsDone); a.Receipts.Run(receiptsCtx) }()

	srv := &http.Server{
		Handler:           a.Handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      a.opts.RequestTimeout + 15*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	close(a.serving)

	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
	}
	log := a.opts.Logger
	log.Info().Dur("grace", a.opts.ShutdownGrace).Msg("shutting down: no new requests; waiting for requests and jobs in flight")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), a.opts.ShutdownGrace)
	defer cancel()

	err := srv.Shutdown(shutdownCtx)
	if serveErr == nil {
		serveErr = <-errc
	}
	if !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if stopErr := a.River.Stop(shutdownCtx); stopErr != nil {
		log.Warn().Err(stopErr).Msg("workers did not stop in time; cancelling them")
		cancelCtx, cancelStop := context.WithTimeout(context.Background(), 5*time.Second)
		_ = a.River.StopAndCancel(cancelCtx)
		cancelStop()
	}
	// The dispatcher finishes the batch under way, if any.
	stopReceipts()
	<-receiptsDone
	stopBeat()
	if delErr := dbsqlc.New().InstanceDelete(context.WithoutCancel(ctx), a.Pool, a.InstanceID); delErr != nil {
		log.Warn().Err(delErr).Msg("could not deregister instance; its leases go stale after missed heartbeats")
	}
	log.Info().Msg("stopped")
	return err
}

func (a *App) register(ctx context.Context) error {
	host, _ := os.Hostname()
	err := dbsqlc.New().InstanceRegister(ctx, a.Pool, &dbsqlc.InstanceRegisterParams{
		ID: a.InstanceID, Hostname: host, Pid: int32(os.Getpid()),
	})
	if err != nil {
		return fmt.Errorf("error registering instance: %w", err)
	}
	a.alive.beat()
	a.history.observe(ctx, a.Pool, a.opts.Logger)
	return nil
}

// heartbeat proves the instance alive until ctx ends. If the reaper forgot
// the instance (it was silent for long), it registers again.
func (a *App) heartbeat(ctx context.Context) {
	t := time.NewTicker(a.opts.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// Bounded like any transaction: a commit that cannot finish must
		// not stop the heartbeats that follow it.
		beatCtx, cancel := context.WithTimeout(ctx, db.TxTimeout)
		n, err := dbsqlc.New().InstanceHeartbeat(beatCtx, a.Pool, a.InstanceID)
		switch {
		case err != nil:
			a.opts.Logger.Warn().Err(err).Msg("heartbeat failed")
		case n == 0:
			_ = a.register(beatCtx)
		default:
			a.alive.beat()
			a.history.observe(beatCtx, a.Pool, a.opts.Logger)
		}
		cancel()
	}
}

// Serving is closed once Run has registered the instance, started the
// workers and begun to serve.
func (a *App) Serving() <-chan struct{} { return a.serving }
