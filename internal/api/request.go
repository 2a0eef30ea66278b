package api

import (
	"context"

	"github.com/rs/zerolog"
)

// requestKey finds a request's requestState in its context.
type requestKey struct{}

// requestState is what the middleware and the handler learn about a request
// as it goes. accessLog puts it in the context once; authenticate fills in
// the user, serveIdempotent the key and how far the request got, rather than
// copying the request again for each value.
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
	id            string
	userID        int64
	key, flow     string
	recoveryPoint string
	// route is the pattern of the endpoint that served the request, for
	// the metrics (empty: the access log asks chi).
	route string
}

// withRequest returns ctx carrying st and a logger, built from log, that
// logs st's fields.
func withRequest(ctx context.Context, log zerolog.Logger, st *requestState) context.Context {
	return log.Hook(st).WithContext(context.WithValue(ctx, requestKey{}, st))
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
