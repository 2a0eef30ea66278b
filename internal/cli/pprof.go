package cli

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/profiling"
)

// servePprof serves Go's profiles on addr (PAYMENTSD_PPROF_ADDR), a listener
// of its own so they never share the API's port. Keep it on loopback: a
// profile shows code paths and timings, never secrets, but it is not public.
// Block and mutex sampling are on only while a profile of them is taken
// (see package profiling).
func servePprof(ctx context.Context, addr string, log zerolog.Logger) {
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn().Err(err).Str("addr", addr).Msg("pprof not served")
		return
	}
	srv := &http.Server{Handler: profiling.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving pprof")
}
