package api

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/metrics"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// MaxBodyBytes is the largest request body accepted.
const MaxBodyBytes = 1 << 20

// createPayment serves POST /payments. Everything that can be refused
// without the store is refused before the key is reserved, and nothing is
// stored for it, so a corrected retry with the same key proceeds.
func (s *Server) createPayment(w http.ResponseWriter, r *http.Request) {
	key, err := idempotency.ParseKey(r.Header.Values(idempotency.Header))
	if err != nil {
		kind := problem.IdempotencyKeyInvalid
		if errors.Is(err, idempotency.ErrMissing) {
			kind = problem.IdempotencyKeyMissing
		}
		writeProblem(w, problem.New(kind, err.Error()))
		return
	}
	zerolog.Ctx(r.Context()).UpdateContext(func(c zerolog.Context) zerolog.Context {
		return c.Str("idempotency_key", key)
	})

	body, ok := readJSONBody(w, r)
	if !ok {
		return
	}
	params, errs := payments.DecodeParams(body)
	if errs != nil {
		p := problem.New(problem.InvalidRequest, "The request body is not a valid payment.")
		p.Errors = errs
		writeProblem(w, p)
		return
	}
	// The fingerprint covers the request as decoded, not as written: a null
	// optional member and a member left out are the same request.
	canonical, fingerprint, err := idempotency.Fingerprint(r.Method, payments.Path, params.Canonical())
	if err != nil { // DecodeParams accepted it, so it is JSON; keep the guard
		writeProblem(w, problem.New(problem.InvalidRequest, "The request body is not valid JSON."))
		return
	}

	// Once the key is reserved the payment must run to a recorded outcome
	// even if the client hangs up: detach from its cancellation, bounded.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.engine.Execute(ctx, &phases.Request{
		UserID:      userID(r.Context()),
		Key:         key,
		Flow:        payments.FlowName,
		Method:      r.Method,
		Path:        payments.Path,
		Params:      canonical,
		Fingerprint: fingerprint,
	})
	logRecoveryPoint(r, res, err)
	if err != nil {
		f := classify(err)
		s.metrics.IdempotencyOutcomes.WithLabelValues(f.outcome).Inc()
		f.write(w, r, err)
		return
	}
	outcome := metrics.OutcomeCreated
	if res.Replayed {
		outcome = metrics.OutcomeReplayed
	}
	s.metrics.IdempotencyOutcomes.WithLabelValues(outcome).Inc()
	writeStored(w, res)
}

// logRecoveryPoint adds to the access line how far the request got.
func logRecoveryPoint(r *http.Request, res *phases.Result, err error) {
	point := ""
	var ambiguous *phases.AmbiguousError
	switch {
	case err == nil:
		point = string(phases.Finished)
	case errors.As(err, &ambiguous):
		point = string(ambiguous.Point)
	default:
		return
	}
	zerolog.Ctx(r.Context()).UpdateContext(func(c zerolog.Context) zerolog.Context {
		return c.Str("recovery_point", point)
	})
}

// writeStored sends a stored response exactly as it was stored.
func writeStored(w http.ResponseWriter, res *phases.Result) {
	h := w.Header()
	for name, value := range res.Response.Headers {
		h.Set(name, value)
	}
	if res.Replayed {
		h.Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(res.Response.Status)
	_, _ = w.Write(res.Response.Body)
}

// readJSONBody checks the media type and reads a body of at most
// MaxBodyBytes. On failure it has answered and returns false.
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	charset, hasCharset := params["charset"]
	if err != nil || mediaType != "application/json" || (hasCharset && !strings.EqualFold(charset, "utf-8")) {
		writeProblem(w, problem.New(problem.UnsupportedMediaType, "Send the body as Content-Type: application/json (UTF-8)."))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
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

// getPayment serves GET /payments/{id}: the caller's own payment, and 404
// for anyone else's, so ids reveal nothing across users.
func (s *Server) getPayment(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id < 1 {
		writeProblem(w, problem.New(problem.InvalidRequest, "The payment id must be a positive integer."))
		return
	}
	payment, err := s.queries.PaymentGetByIDForUser(r.Context(), s.pool, &dbsqlc.PaymentGetByIDForUserParams{
		ID: id, UserID: userID(r.Context()),
	})
	if err = db.InterpretError(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			writeProblem(w, problem.New(problem.NotFound, "No such payment."))
			return
		}
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, payments.ViewOf(payment))
}
