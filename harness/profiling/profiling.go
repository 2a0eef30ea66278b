// Package profiling serves Go's profiles (net/http/pprof) for a process that
// is being measured: the service (its profiled build,
// harness/cmd/paymentsd-profiled) and the bare service of `make bench`
// serve the same handler, so that both pay alike for being profiled. The
// paymentsd binary links none of it.
//
// Block and mutex profiling cost something on every blocking event while
// they are on, so they are on only while someone asks for them: a request
// for /debug/pprof/block or /debug/pprof/mutex with ?seconds=N turns its
// sampling on for those N seconds and answers with what it sampled then
// (a delta profile). Outside such a window the process runs as it would
// unprofiled, but for the CPU profile's own sampling while one is taken.
package profiling

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"sync"
	"time"
)

// Sampling while a window is open: blocking of 100µs and more, one mutex
// contention event in 10.
const (
	BlockRate     = int(100 * time.Microsecond)
	MutexFraction = 10
)

// Serve serves Handler on addr, a listener of its own, until ctx is done. It
// fails when addr cannot be listened on: a profiled run needs its profiles.
// Keep addr on loopback: a profile shows code paths and timings, never
// secrets, but it is not public.
func Serve(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("error serving pprof: %w", err)
	}
	srv := &http.Server{Handler: Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return nil
}

// Handler serves /debug/pprof/.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/debug/pprof/block", windowed(pprof.Handler("block"), func(on bool) {
		runtime.SetBlockProfileRate(choose(on, BlockRate))
	}))
	mux.Handle("/debug/pprof/mutex", windowed(pprof.Handler("mutex"), func(on bool) {
		runtime.SetMutexProfileFraction(choose(on, MutexFraction))
	}))
	return mux
}

func choose(on bool, v int) int {
	if on {
		return v
	}
	return 0
}

// windowed turns a profile's sampling on while a request with ?seconds=
// for it is being answered (several at once share the window).
func windowed(h http.Handler, set func(on bool)) http.Handler {
	var (
		mu    sync.Mutex
		users int
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("seconds") == "" {
			h.ServeHTTP(w, r) // what was sampled in earlier windows
			return
		}
		mu.Lock()
		if users++; users == 1 {
			set(true)
		}
		mu.Unlock()
		defer func() {
			mu.Lock()
			if users--; users == 0 {
				set(false)
			}
			mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}
