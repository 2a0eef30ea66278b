package stripefake

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// shutdownGrace bounds how long a graceful shutdown waits for requests.
const shutdownGrace = 10 * time.Second

// ListenAndServe listens on addr and serves s until ctx is done, then shuts
// down gracefully. It returns nil after a shutdown caused by ctx.
func ListenAndServe(ctx context.Context, addr string, s *Server) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return Serve(ctx, ln, s)
}

// Serve serves s on ln until ctx is done, then shuts down gracefully: hung
// requests are released (they then complete normally), requests in flight,
// and creates still executing after their client left, get up to 10 seconds
// to finish; then webhook deliveries stop (Close). It closes ln and returns
// nil after a shutdown caused by ctx.
func Serve(ctx context.Context, ln net.Listener, s *Server) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	s.log.Info().Str("addr", ln.Addr().String()).Msg("stripefake listening")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.ReleaseHangs()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	s.awaitExecutions(sctx)
	s.Close()
	s.log.Info().Msg("stripefake stopped")
	return err
}

// awaitExecutions waits until no create is executing or ctx ends. Creates
// whose client left are not tracked by the http.Server, so Shutdown alone
// would not wait for them.
func (s *Server) awaitExecutions(ctx context.Context) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.Stats().ExecutingNow > 0 {
		select {
		case <-ctx.Done():
			s.log.Warn().Int64("executing", s.Stats().ExecutingNow).Msg("stripefake: stopped with creates still executing")
			return
		case <-tick.C:
		}
	}
}
