package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/metrics"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// writeProblem answers with p.
func writeProblem(w http.ResponseWriter, p *problem.Problem) {
	w.Header().Set("Content-Type", problem.ContentType)
	w.WriteHeader(p.Status)
	_, _ = w.Write(p.JSON())
}

// writeRetryable answers with p and a Retry-After header.
func writeRetryable(w http.ResponseWriter, p *problem.Problem, after time.Duration) {
	secs := int((after + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	writeProblem(w, p)
}

// Retry-After advice per kind of temporary failure.
const (
	retryInProgress = time.Second
	retryProcessor  = 2 * time.Second
	retryStore      = 5 * time.Second
)

// writeError maps an error from below the HTTP layer to its problem. The
// error itself is logged, never sent: it may name internals.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		inProgress *phases.InProgressError
		ambiguous  *phases.AmbiguousError
		refused    *phases.RefusedError
	)
	switch {
	case errors.As(err, &refused) && refused.Reason == phases.ReasonTooManyUnfinished:
		writeRetryable(w, problem.New(problem.TooManyUnfinishedKeys,
			"You have too many requests still in progress. Retry these first, or wait for them to finish."), refused.RetryAfter)
	case errors.As(err, &refused):
		writeRetryable(w, problem.New(problem.RateLimited,
			"Too many new idempotency keys. Slow down; retries of existing keys are not limited."), refused.RetryAfter)
	case errors.Is(err, phases.ErrKeyReused):
		writeProblem(w, problem.New(problem.IdempotencyKeyReused,
			"This idempotency key was already used with a different request. Send a new key for a new request."))
	case errors.As(err, &inProgress):
		writeRetryable(w, problem.New(problem.IdempotencyKeyInUse,
			"A request with this idempotency key is still being processed. Retry later with the same key."), inProgress.RetryAfter)
	case errors.Is(err, phases.ErrLeaseLost):
		writeRetryable(w, problem.New(problem.IdempotencyKeyInUse,
			"Another attempt took this request over. Retry later with the same key."), retryInProgress)
	case errors.As(err, &ambiguous):
		zerolog.Ctx(r.Context()).Warn().Err(err).Str("recovery_point", string(ambiguous.Point)).Msg("payment processor outcome unknown")
		writeRetryable(w, problem.New(problem.ProcessorUnavailable,
			"The payment processor could not be reached or gave no definite answer. Retry with the same key: the request resumes where it stopped."), retryProcessor)
	case db.IsUnavailable(err):
		zerolog.Ctx(r.Context()).Error().Err(err).Msg("store unavailable")
		writeRetryable(w, problem.New(problem.StoreUnavailable,
			"The service cannot reach its database. Retry with the same key: the request resumes where it stopped and is never charged twice."), retryStore)
	default:
		zerolog.Ctx(r.Context()).Error().Err(err).Msg("internal error")
		writeProblem(w, problem.New(problem.InternalError, "An unexpected error occurred."))
	}
}

// outcomeOf names what became of an idempotent request, for metrics.
func outcomeOf(res *phases.Result, err error) string {
	var (
		inProgress *phases.InProgressError
		ambiguous  *phases.AmbiguousError
		refused    *phases.RefusedError
	)
	switch {
	case err == nil && res.Replayed:
		return metrics.OutcomeReplayed
	case err == nil:
		return metrics.OutcomeCreated
	case errors.Is(err, phases.ErrKeyReused):
		return metrics.OutcomeKeyReused
	case errors.As(err, &inProgress):
		return metrics.OutcomeInProgress
	case errors.Is(err, phases.ErrLeaseLost):
		return metrics.OutcomeLeaseLost
	case errors.As(err, &ambiguous):
		return metrics.OutcomeAmbiguous
	case errors.As(err, &refused):
		return metrics.OutcomeRateLimited
	}
	return metrics.OutcomeStoreError
}
