package api

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"
)

// requestKey finds a request's requestState in its context.
type requestKey struct{}

// requestState is what the middleware and the handler learn about a request
// as it goes. accessLog makes it the request's context once; authenticate
// fills in the user, serveIdempotent the key and how far the request got,
// rather than copying the request again for each value.
//
// It is a context.Context itself, over the connection's, answering for
// itself and for chi's routing context, which it holds: one allocation and
// one copy of the request carry both, and the response writer that records
// the status too (chi routes a request whose context has a routing context
// without copying it again).
//
// It is also the request logger's hook: every line logged for the request
// carries its fields as they stand when the line is written. A logger built
// with zerolog's With() would copy a 500-byte buffer for each request and
// again as fields are added; a hook costs one small allocation.
//
// Its fields are written and read on the request's goroutine only, without
// a lock (the engine runs a request's phases on it, detached or not): code
// that logs through the request's context from a goroutine of its own must
// not run while the handler still writes them.
type requestState struct {
	context.Context

	id            string
	userID        int64
	key, flow     string
	recoveryPoint string
	// route is the pattern of the endpoint that served the request, for
	// the metrics (empty: the access log asks chi).
	route string

	// routing is chi's routing context, and the arrays its slices start
	// in: room for the pattern and the path value of every route served.
	routing     chi.Context
	patterns    [1]string
	paramKeys   [1]string
	paramValues [1]string

	writer statusWriter
}

// newRequestState returns the state of a request to be routed by routes,
// whose context is parent and whose answer goes to w.
func newRequestState(parent context.Context, id string, routes chi.Routes, w http.ResponseWriter) *requestState {
	st := &requestState{Context: parent, id: id, writer: statusWriter{ResponseWriter: w}}
	st.routing.Routes = routes
	st.routing.RoutePatterns = st.patterns[:0]
	st.routing.URLParams.Keys, st.routing.URLParams.Values = st.paramKeys[:0], st.paramValues[:0]
	return st
}

// Value answers for the request's state and its routing context, and asks
// the connection's context for anything else.
func (st *requestState) Value(key any) any {
	switch key {
	case requestKey{}:
		return st
	case chi.RouteCtxKey:
		return &st.routing
	}
	return st.Context.Value(key)
}

// withLogger returns st with a logger, built from log, that logs st's
// fields.
func (st *requestState) withLogger(log zerolog.Logger) context.Context {
	return log.Hook(st).WithContext(st)
}

// request is the state of the request ctx belongs to.
func request(ctx context.Context) *requestState { return ctx.Value(requestKey{}).(*requestState) }

// userID is the authenticated user of the request.
func userID(ctx context.Context) int64 { return request(ctx).userID }

// Run adds the request's fields to a line logged for it.
func (st *requestState) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str("request_id", st.id)
	if st.userID != 0 {
		e.Int64("user_id", st.userID)
	}
	if st.key != "" {
		e.Str("idempotency_key", st.key).Str("flow", st.flow)
	}
	if st.recoveryPoint != "" {
		e.Str("recovery_point", st.recoveryPoint)
	}
}

// statusWriter remembers the status a handler answered with, for the access
// log and the metrics; Unwrap keeps the connection's own writer reachable
// through http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader writes and records the first final status (an informational
// 1xx precedes one); a later one is dropped, as net/http would drop it
// after logging it as superfluous.
func (w *statusWriter) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	if status >= http.StatusOK {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write writes the body, 200 unless a status was written before.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Status is the status the client was answered with.
func (w *statusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK // nothing written: net/http answers 200
	}
	return w.status
}

// Unwrap is the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// unwrap is the writer under w, by the Unwrap that http.ResponseController
// follows too; w itself when it wraps none.
func unwrap(w http.ResponseWriter) http.ResponseWriter {
	if u, ok := w.(interface{ Unwrap() http.ResponseWriter }); ok {
		return u.Unwrap()
	}
	return w
}
