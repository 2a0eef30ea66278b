package api

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/problem"
)

// accessLog gives each request a request id, its state and a logger that
// logs both (see requestState), routes it through routes, and writes one
// line per request. It never logs headers or bodies: they carry API keys
// and payment data.
func (s *Server) accessLog(routes chi.Router) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := newRequestID()
		w.Header().Set("Request-Id", id)
		st := newRequestState(r.Context(), id, routes, w)
		r = r.WithContext(st.withLogger(s.log))

		routes.ServeHTTP(&st.writer, r)

		route := st.route // an endpoint's own pattern, without chi joining it again
		if route == "" {
			route = st.routing.RoutePattern()
		}
		if route == "" {
			route = "unmatched" // keeps unknown paths from inflating label cardinality
		}
		took := time.Since(start)
		status := st.writer.Status()
		s.metrics.ObserveRequest(route, methodLabel(r.Method), status, took)
		if line := zerolog.Ctx(r.Context()).Info(); line.Enabled() { // below info, skip reading the headers
			line.Str("method", r.Method).
				Str("route", route).
				Int("status", status).
				Bool("replayed", w.Header().Get("Idempotent-Replayed") == "true").
				Dur("duration", took).
				Msg("request")
		}
	})
}

// methodLabel is a request's method as the metrics label it: a method of
// HTTP's own, or "other", so that a client inventing methods cannot add a
// series for each.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return "other"
}

// recoverPanic turns a panic into a generic 500 problem and logs it.
func (s *Server) recoverPanic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				zerolog.Ctx(r.Context()).Error().Interface("panic", v).Msg("handler panicked")
				writeProblem(w, problem.New(problem.InternalError, "An unexpected error occurred."))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// newRequestID is "req_" and 96 random bits in hex.
func newRequestID() string {
	var random [12]byte
	_, _ = rand.Read(random[:])
	id := [len("req_") + 2*len(random)]byte{'r', 'e', 'q', '_'}
	hex.Encode(id[len("req_"):], random[:])
	return string(id[:])
}
