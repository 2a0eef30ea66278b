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

// writeProblem answers with p, ending with a newline. (A problem stored
// as a key's response is written as stored, by writeStored.)
func writeProblem(w http.ResponseWriter, p *problem.Problem) {
	w.Header().Set("Content-Type", problem.ContentType)
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(p.JSON(), '\n'))
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
	// An operator settles a parked key in minutes, not seconds.
	retryOperator = time.Minute
)

// failure is what an error from below the HTTP layer means: the problem the
// client gets, whether and when it may retry, and the outcome metrics count.
type failure struct {
	problem    *problem.Problem
	retryAfter time.Duration // zero: no Retry-After
	outcome    string
}

// statusClientClosed is the status recorded, in the access log and the
// metrics, for a request whose client hung up before it was admitted: the
// one nginx records. No client reads it.
const statusClientClosed = 499

// classifyFor is classify for an error met while serving r. When r's
// client hung up (r's context was canceled) and err is that cancellation,
// it is the client's doing, neither the store's nor a bug: a request is
// detached from its client once its key is reserved, so this can only
// happen before anything was stored.
func classifyFor(r *http.Request, err error) failure {
	if cause := r.Context().Err(); cause != nil && errors.Is(err, cause) {
		return failure{outcome: metrics.OutcomeClientClosed}
	}
	return classify(err)
}

// classify maps an error from the engine or the store to its failure. It is
// the one place that decides status codes for errors.
func classify(err error) failure {
	var (
		inProgress *phases.InProgressError
		ambiguous  *phases.AmbiguousError
		refused    *phases.RefusedError
		attention  *phases.NeedsAttentionError
		expired    *phases.KeyExpiredError
	)
	switch {
	case errors.As(err, &attention):
		return failure{problem.New(problem.NeedsAttention,
			"The outcome of this request could not be settled automatically and awaits an operator; it will not be charged again meanwhile. "+
				"Retry later with the same key: once it is settled, its answer is replayed."),
			retryOperator, metrics.OutcomeNeedsAttention}
	case errors.As(err, &refused) && refused.Reason == phases.ReasonTooManyUnfinished:
		return failure{problem.New(problem.TooManyUnfinishedKeys,
			"You have too many requests still in progress. Retry these first, or wait for them to finish."),
			refused.RetryAfter, metrics.OutcomeTooManyUnfinished}
	case errors.As(err, &refused):
		return failure{problem.New(problem.RateLimited,
			"Too many new idempotency keys. Slow down; retries of existing keys are not limited."),
			refused.RetryAfter, metrics.OutcomeRateLimited}
	case errors.Is(err, phases.ErrKeyReused):
		return failure{problem.New(problem.IdempotencyKeyReused,
			"This idempotency key was already used with a different request. Send a new key for a new request."),
			0, metrics.OutcomeKeyReused}
	case errors.As(err, &expired):
		// A client error never to be retried: running the request again
		// could charge twice. The problem names what the original made.
		detail := "This idempotency key was used for a request that finished at " + expired.FinishedAt.UTC().Format(time.RFC3339) +
			" and has expired: it is never run again."
		if !expired.SameRequest {
			detail = "This idempotency key was used for a different request, which finished at " + expired.FinishedAt.UTC().Format(time.RFC3339) +
				" and has expired."
		}
		p := problem.New(problem.IdempotencyKeyExpired, detail+" Send a new key for a new request.")
		id := expired.ResourceID
		switch expired.ResourceType { // named by IdempotencyKeyReap
		case "payment":
			p.PaymentID = expired.ResourceID
			p.Detail = detail + " It made payment " + id + " (GET /payments/" + id + "). Send a new key for a new payment."
		case "refund":
			p.RefundID = expired.ResourceID
			p.Detail = detail + " It made refund " + id + " (GET /refunds/" + id + "). Send a new key for a new refund."
		}
		return failure{p, 0, metrics.OutcomeKeyExpired}
	case errors.As(err, &inProgress):
		return failure{problem.New(problem.IdempotencyKeyInUse,
			"A request with this idempotency key is still being processed. Retry later with the same key."),
			inProgress.RetryAfter, metrics.OutcomeInProgress}
	case errors.Is(err, phases.ErrLeaseLost):
		return failure{problem.New(problem.IdempotencyKeyInUse,
			"Another attempt took this request over. Retry later with the same key."),
			retryInProgress, metrics.OutcomeLeaseLost}
	case errors.As(err, &ambiguous):
		return failure{problem.New(problem.ProcessorUnavailable,
			"The payment processor could not be reached or gave no definite answer. Retry with the same key: the request resumes where it stopped."),
			retryProcessor, metrics.OutcomeAmbiguous}
	case db.IsUnavailable(err):
		return failure{problem.New(problem.StoreUnavailable,
			"The service cannot reach its database. Retry with the same key: the request resumes where it stopped and is never charged twice."),
			retryStore, metrics.OutcomeStoreError}
	}
	return failure{problem.New(problem.InternalError, "An unexpected error occurred."), 0, metrics.OutcomeInternalError}
}

// write logs what an operator must see (never sent: it may name internals)
// and answers with the problem.
func (f failure) write(w http.ResponseWriter, r *http.Request, err error) {
	log := zerolog.Ctx(r.Context())
	switch f.outcome {
	case metrics.OutcomeAmbiguous:
		log.Warn().Err(err).Msg("payment processor outcome unknown")
	case metrics.OutcomeNeedsAttention:
		log.Warn().Err(err).Msg("request awaits an operator")
	case metrics.OutcomeStoreError:
		log.Error().Err(err).Msg("store unavailable")
	case metrics.OutcomeInternalError:
		log.Error().Err(err).Msg("internal error")
	case metrics.OutcomeClientClosed:
		log.Info().Msg("the client hung up before its request was admitted")
		w.WriteHeader(statusClientClosed)
		return
	}
	if f.retryAfter > 0 {
		writeRetryable(w, f.problem, f.retryAfter)
		return
	}
	writeProblem(w, f.problem)
}

// writeError answers for an error from below the HTTP layer.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	f := classifyFor(r, err)
	if f.outcome == metrics.OutcomeStoreError && r.Header.Get("Idempotency-Key") == "" {
		// A read, or a webhook: there is no key to retry with.
		f.problem = problem.New(problem.StoreUnavailable, "The service cannot reach its database. Retry later; nothing was changed.")
	}
	f.write(w, r, err)
}
