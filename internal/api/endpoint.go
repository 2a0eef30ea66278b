package api

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/metrics"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 1 << 20

// Endpoint declares one idempotent operation. Mounted once, it registers its
// flow with the engine and its route with the router, and every request to
// it takes the same path: key, body, execute, answer; the engine has the
// body decoded and fingerprinted when it needs them, which a replay of the
// request as first sent does not.
// A new idempotent endpoint is an Endpoint value, a flow and its queries.
type Endpoint struct {
	// Method and Pattern route the requests (a chi pattern, such as
	// "/payments/{id}/refunds").
	Method, Pattern string
	// Flow drives each request's key.
	Flow phases.AnyFlow
	// Noun names what a body describes, for the 400 answer ("payment").
	Noun string
	// Decode validates the body and the path values (pathValue returns one
	// by name) and returns the request as the flow will read it back: its
	// params in JSON, path values included (encoding/json's encoding of a
	// params struct), which the fingerprint covers and the key row stores,
	// both in RFC 8785 form. Field errors answer 400 and store nothing, so
	// a corrected retry with the same key proceeds. It must depend on its
	// arguments alone: a retry that sends what the request that made its
	// key sent (method, path as sent, body) is answered without it
	// (idempotency.Digest).
	Decode func(body []byte, pathValue func(string) string) (params []byte, errs []problem.FieldError)
	// Admit, when set, may refuse a decoded request before its key is
	// reserved (a resource the caller may not act on, say): the problem is
	// answered and nothing is stored. An error (the store) is answered as
	// any other. It is asked only for a key that does not exist yet: a
	// retry or replay of an admitted request is not asked again.
	Admit func(ctx context.Context, userID int64, params []byte) (*problem.Problem, error)
}

// serveIdempotent answers one request to ep. Everything that can be refused
// without the engine is refused before the key is reserved.
func (s *Server) serveIdempotent(ep *Endpoint, w http.ResponseWriter, r *http.Request) {
	key, err := idempotency.ParseKey(r.Header.Values(idempotency.Header))
	if err != nil {
		kind := problem.IdempotencyKeyInvalid
		if errors.Is(err, idempotency.ErrMissing) {
			kind = problem.IdempotencyKeyMissing
		}
		writeProblem(w, problem.New(kind, err.Error()))
		return
	}
	logField(r, func(c zerolog.Context) zerolog.Context {
		return c.Str("idempotency_key", key).Str("flow", ep.Flow.FlowName())
	})

	body, ok := readJSONBody(w, r)
	if !ok {
		return
	}
	user := userID(r.Context())
	req := &phases.Request{
		UserID:     user,
		Key:        key,
		Flow:       ep.Flow.FlowName(),
		Method:     r.Method,
		Path:       r.URL.Path,
		Digest:     idempotency.Digest(r.Method, r.URL.EscapedPath(), body),
		RunTimeout: s.cfg.RequestTimeout,
	}
	// The body is decoded only when the engine needs it: a replay of the
	// request as it was first sent is known by its digest (phases.Request).
	// A body that does not decode is refused before any key is reserved,
	// as a refusal: nothing is stored, so a corrected retry proceeds.
	req.Prepare = func(req *phases.Request) error {
		params, errs := ep.Decode(body, func(name string) string { return chi.URLParam(r, name) })
		if errs != nil {
			p := problem.New(problem.InvalidRequest, "The request is not a valid "+ep.Noun+".")
			p.Errors = errs
			return &refusal{p}
		}
		// The fingerprint covers the request as decoded, not as written: a
		// null optional member and a member left out are one request, and so
		// are /payments/42 and /payments/042. Path values are in params, so
		// one key sent to two resources is two requests.
		canonical, fingerprint, err := idempotency.Fingerprint(r.Method, ep.Pattern, params)
		if err != nil { // Decode produced it, so it is JSON; keep the guard
			return &refusal{problem.New(problem.InvalidRequest, "The request body is not valid JSON.")}
		}
		req.Params, req.Fingerprint = canonical, fingerprint
		return nil
	}
	if ep.Admit != nil {
		req.Admit = func(ctx context.Context) error {
			p, err := ep.Admit(ctx, user, req.Params)
			if err != nil || p == nil {
				return err
			}
			return &refusal{p}
		}
	}

	// Once the key is reserved the request must run to a recorded outcome
	// even if the client hangs up: the engine detaches the run from its
	// cancellation then, bounded by RunTimeout.
	res, err := s.engine.Execute(r.Context(), req)
	var refused *refusal
	if errors.As(err, &refused) {
		writeProblem(w, refused.p)
		return
	}
	logRecoveryPoint(r, err)
	if err != nil {
		f := classifyFor(r, err)
		s.metrics.Outcome(ep.Flow.FlowName(), f.outcome)
		f.write(w, r, err)
		return
	}
	outcome := metrics.OutcomeCreated
	if res.Replayed {
		outcome = metrics.OutcomeReplayed
	}
	s.metrics.Outcome(ep.Flow.FlowName(), outcome)
	writeStored(w, res)
}

// refusal is a request refused before its key was reserved, by its
// Endpoint's Decode or Admit: its problem is the answer, and nothing was
// stored.
type refusal struct{ p *problem.Problem }

func (r *refusal) Error() string { return r.p.Detail }

// logRecoveryPoint adds to the access line how far the request got.
func logRecoveryPoint(r *http.Request, err error) {
	point := phases.Finished
	if err != nil {
		var ambiguous *phases.AmbiguousError
		if !errors.As(err, &ambiguous) {
			return
		}
		point = ambiguous.Point
	}
	logField(r, func(c zerolog.Context) zerolog.Context { return c.Str("recovery_point", string(point)) })
}

// writeStored sends a stored response exactly as it was stored.
func writeStored(w http.ResponseWriter, res *phases.Result) {
	res.Response.WriteHeaders(w.Header())
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(res.Response.Status)
	_, _ = w.Write(res.Response.Body)
}

// readJSONBody checks the media type and reads a body of at most
// MaxBodyBytes. On failure it has answered and returns false.
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if !isJSON(r.Header.Get("Content-Type")) {
		writeProblem(w, problem.New(problem.UnsupportedMediaType, "Send the body as Content-Type: application/json (UTF-8)."))
		return nil, false
	}
	// MaxBytesReader closes the connection once the limit is hit only when
	// it is handed the connection's own writer, the one under the access
	// log's.
	conn := w
	if u, ok := w.(interface{ Unwrap() http.ResponseWriter }); ok {
		conn = u.Unwrap()
	}
	body, err := readBody(http.MaxBytesReader(conn, r.Body, MaxBodyBytes), r.ContentLength)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeProblem(w, problem.New(problem.RequestTooLarge, "The request body is larger than 1 MiB."))
		} else {
			writeProblem(w, problem.New(problem.InvalidRequest, "The request body could not be read."))
		}
		return nil, false
	}
	return body, true
}

// readBody reads a body to its end: into a buffer of its length when the
// request declares one within MaxBodyBytes (net/http then ends the body
// there), otherwise as io.ReadAll does, growing the buffer as it reads
// (r's limit refuses a body that is too large). A payment's body is about
// a hundred bytes, and io.ReadAll starts at 512: BenchmarkReplay allocates
// 2.75% fewer bytes a replay this way.
func readBody(r io.Reader, length int64) ([]byte, error) {
	if length < 0 || length > MaxBodyBytes {
		return io.ReadAll(r)
	}
	body := make([]byte, length)
	_, err := io.ReadFull(r, body)
	return body, err
}

// isJSON accepts application/json, in UTF-8 if a charset is named.
func isJSON(contentType string) bool {
	mediaType, params, err := mime.ParseMediaType(contentType)
	charset, hasCharset := params["charset"]
	return err == nil && mediaType == "application/json" && (!hasCharset || strings.EqualFold(charset, "utf-8"))
}
