package cli

import (
	"context"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/rs/zerolog"
)

// servePprof serves Go's profiles on addr (PAYMENTSD_PPROF_ADDR), a listener
// of its own so they never share the API's port. Keep it on loopback: a
// profile shows code paths and timings, never secrets, but it is not public.
func servePprof(ctx context.Context, addr string, log zerolog.Logger) {
	if addr == "" {
		return
	}
	runtime.SetBlockProfileRate(int(time.Millisecond / 10)) // sample blocking of 100µs and more
	runtime.SetMutexProfileFraction(10)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Warn().Err(err).Str("addr", addr).Msg("pprof not served")
		return
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving pprof")
}
