package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/problem"
)

// accessLog gives each request a request id and a logger that logs it, and
// writes one line per request once it is answered, with the metrics. The
// handlers add what they learn to the request's logger (logField): the
// user, the idempotency key and its flow, how far the request got. It never
// logs headers or bodies: they carry API keys and payment data.
//
// It is the router's first middleware, so that chi's routing context, which
// names the route pattern, is still there when the handler returns.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := newRequestID()
		w.Header().Set("Request-Id", id)
		log := s.log.With().Str("request_id", id).Logger()
		r = r.WithContext(log.WithContext(r.Context()))
		ww := &statusWriter{ResponseWriter: w}

		next.ServeHTTP(ww, r)

		route := chi.RouteContext(r.Context()).RoutePattern()
		if route == "" {
			route = "unmatched" // keeps unknown paths from inflating label cardinality
		}
		status := ww.status
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
		}
		took := time.Since(start)
		s.metrics.ObserveRequest(route, methodLabel(r.Method), status, took)
		zerolog.Ctx(r.Context()).Info().
			Str("method", r.Method).
			Str("route", route).
			Int("status", status).
			Bool("replayed", w.Header().Get("Idempotent-Replayed") == "true").
			Dur("duration", took).
			Msg("request")
	})
}

// statusWriter records the status a handler answers with. (chi's
// middleware.WrapResponseWriter would do, but its package links
// net/http/pprof into the binary.) Unwrap lets http.ResponseController
// reach the connection beneath.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logField adds a field to every line logged for r from now on, the access
// line included. It changes the request's logger in place (zerolog's
// UpdateContext), so it must not run while another goroutine logs through
// r's context; the engine runs a request's phases on the handler's own.
func logField(r *http.Request, add func(zerolog.Context) zerolog.Context) {
	zerolog.Ctx(r.Context()).UpdateContext(add)
}

// userKey is the context key of the authenticated user's id.
type userKey struct{}

// userID is the authenticated user of the request (authenticate).
func userID(ctx context.Context) int64 {
	id, _ := ctx.Value(userKey{}).(int64)
	return id
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
	return "req_" + hex.EncodeToString(random[:])
}
