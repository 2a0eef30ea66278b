package phases

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// drive runs a key's flow to its end or to the first ambiguous outcome. open
// takes the lease inside the first transaction, so for a fresh key the
// reservation commits together with the local steps that follow it.
func (e *Engine) drive(ctx context.Context, flow *Flow, open opener, fresh bool) (*Result, error) {
	run := &Run{Fresh: fresh, engine: e, token: uuid.New()}
	res, err := e.driveRun(ctx, flow, run, open)
	if errors.Is(err, ErrLeaseLost) && run.Key != nil {
		// This run wrote nothing after losing its lease; if the key
		// finished meanwhile (another run, or the remote party's own word
		// through a webhook), its stored answer is the answer.
		if key, rerr := e.queries.IdempotencyKeyGetByID(ctx, e.pool, run.Key.ID); rerr == nil && RecoveryPoint(key.RecoveryPoint) == Finished {
			return replay(stateOf(key))
		}
	}
	return res, err
}

// driveRun is drive for one run.
func (e *Engine) driveRun(ctx context.Context, flow *Flow, run *Run, open opener) (*Result, error) {
	resp, err := e.commitPhase(ctx, flow, run, open, nil)
	for {
		if err != nil {
			// A phase failed (the store, most likely) after this run had
			// committed under its lease: free the lease if the store lets
			// us, so a retry need not wait for it to go stale.
			if run.Key != nil && !errors.Is(err, ErrLeaseLost) {
				e.release(context.WithoutCancel(ctx), run, err)
			}
			return nil, err
		}
		if hook := e.cfg.Hooks.AfterCommit; hook != nil {
			if err := hook(ctx, run.RecoveryPoint()); err != nil {
				return nil, err
			}
		}
		if resp != nil {
			return &Result{Response: resp}, nil
		}

		var called any
		if called, err = e.call(ctx, flow, run); err != nil {
			return nil, err
		}
		resp, err = e.commitPhase(ctx, flow, run, nil, &called)
	}
}

// call makes the foreign call of the step at the run's recovery point, within
// the run's lease: a call is never started after the lease could have been
// taken over. On an ambiguous outcome it frees the lease, so the next retry
// resumes at once; a call that says its key needs attention parks the key.
func (e *Engine) call(ctx context.Context, flow *Flow, run *Run) (any, error) {
	point := run.RecoveryPoint()
	start := time.Now()
	callCtx, cancel := context.WithDeadline(ctx, run.leasedAt.Add(e.cfg.LeaseTimeout))
	called, err := flow.Steps[point].call(callCtx, run)
	cancel()
	e.cfg.Observer.CallDone(point, time.Since(start))
	var attention *NeedsAttentionError
	switch {
	case errors.As(err, &attention):
		// Parking must happen even when the client has gone away.
		return nil, e.park(context.WithoutCancel(ctx), run, attention)
	case err != nil:
		e.release(context.WithoutCancel(ctx), run, err)
		return nil, &AmbiguousError{Point: point, Err: err}
	}
	if hook := e.cfg.Hooks.AfterCall; hook != nil {
		if err := hook(ctx, point); err != nil {
			return nil, err
		}
	}
	return called, nil
}

// maxErrorLen bounds what is kept of an error for the operator.
const maxErrorLen = 1000

// release frees the run's lease and records why the run ended without an
// outcome (cause may be nil). A failure is harmless: the lease goes stale.
func (e *Engine) release(ctx context.Context, run *Run, cause error) {
	var lastError *string
	if cause != nil {
		lastError = ptr(truncate(cause.Error(), maxErrorLen))
	}
	_, _ = e.queries.IdempotencyKeyRelease(ctx, e.pool, &dbsqlc.IdempotencyKeyReleaseParams{
		ID: run.Key.ID, LockToken: uuid.NullUUID{UUID: run.token, Valid: true}, LastError: lastError,
	})
}

// park hands the run's key to an operator, fenced by the run's lease, and
// returns what the caller answers with.
func (e *Engine) park(ctx context.Context, run *Run, attention *NeedsAttentionError) error {
	rows, err := e.queries.IdempotencyKeyMarkNeedsAttention(ctx, e.pool, &dbsqlc.IdempotencyKeyMarkNeedsAttentionParams{
		ID: run.Key.ID, LockToken: uuid.NullUUID{UUID: run.token, Valid: true},
		LastError: ptr(truncate(attention.Reason, maxErrorLen)), Kind: attention.kind(),
	})
	switch {
	case err != nil:
		// The lease goes stale and the next run meets the same answer.
		e.release(ctx, run, attention)
		return &AmbiguousError{Point: run.RecoveryPoint(), Err: fmt.Errorf("error parking key for an operator: %w", db.InterpretError(err))}
	case rows == 0:
		return ErrLeaseLost
	}
	e.cfg.Observer.NeedsAttention()
	zerolog.Ctx(ctx).Warn().Int64("idempotency_key_id", run.Key.ID).Str("recovery_point", string(run.RecoveryPoint())).
		Str("reason", attention.Reason).Msg("idempotency key needs attention: parked for an operator")
	return &NeedsAttentionError{Reason: attention.Reason, Conflict: attention.Conflict, Since: time.Now()}
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// commitPhase runs one transaction: open (when taking the lease), then the
// step at the run's recovery point with the result of its call (when called
// is set), then every following step that has no foreign call, and finally
// one fenced write of where the key now stands. It stops before a step with a
// call, and returns the response when the flow finished.
func (e *Engine) commitPhase(ctx context.Context, flow *Flow, run *Run, open opener, called *any) (*Response, error) {
	type outcome struct {
		key   *dbsqlc.IdempotencyKey
		state any
		resp  *Response
	}
	start := time.Now()
	leasedAt := start
	out, err := db.WithTxV(ctx, e.pool, func(ctx context.Context, tx pgx.Tx) (outcome, error) {
		// Work on a copy of the key: a retried transaction starts again from
		// what was committed, and the run only sees what this one commits.
		key := *run.committedKey()
		if open != nil {
			k, err := open(ctx, tx, run.token)
			if err != nil {
				return outcome{}, err
			}
			key = *k
		}
		attempt := &Run{Key: &key, Fresh: run.Fresh, state: run.state, engine: e, token: run.token}
		start := attempt.RecoveryPoint()
		var resp *Response
		for point := start; point != Finished; point = attempt.RecoveryPoint() {
			step, ok := flow.Steps[point]
			if !ok {
				return outcome{}, fmt.Errorf("flow %q has no step at recovery point %q", flow.Name, point)
			}
			var result any
			if step.call != nil {
				if point != start || called == nil {
					break // the call must happen outside this transaction
				}
				result = *called
			}
			t, err := step.apply(ctx, tx, attempt, result)
			if err != nil {
				return outcome{}, fmt.Errorf("error applying step at %q: %w", point, err)
			}
			key.RecoveryPoint, resp = string(t.next), t.response
		}
		if err := e.fence(ctx, tx, attempt, start, open != nil, resp); err != nil {
			return outcome{}, err
		}
		return outcome{key: &key, state: attempt.state, resp: resp}, nil
	})
	if err != nil {
		return nil, db.InterpretError(err)
	}
	run.Key, run.state, run.leasedAt = out.key, out.state, leasedAt
	if open != nil && out.key.LockedAt != nil {
		run.dbLeasedAt, run.localLeasedAt = *out.key.LockedAt, leasedAt
	}
	took := time.Since(start)
	e.cfg.Observer.PhaseCommitted(run.RecoveryPoint(), took)
	zerolog.Ctx(ctx).Debug().Int64("idempotency_key_id", run.Key.ID).Str("recovery_point", string(run.RecoveryPoint())).
		Dur("took", took).Msg("phase committed")
	return out.resp, nil
}

// fence writes the run's new recovery point, or its final response, under the
// run's lease. Zero rows updated means another run holds the key now: the
// transaction rolls back and this run stops.
func (e *Engine) fence(ctx context.Context, tx pgx.Tx, run *Run, start RecoveryPoint, opened bool, resp *Response) error {
	token := uuid.NullUUID{UUID: run.token, Valid: true}
	var (
		rows int64
		err  error
	)
	switch {
	case resp != nil:
		var headers []byte
		if headers, err = resp.headersJSON(); err != nil {
			return fmt.Errorf("error encoding response headers: %w", err)
		}
		rows, err = e.queries.IdempotencyKeyFinish(ctx, tx, &dbsqlc.IdempotencyKeyFinishParams{
			ID: run.Key.ID, LockToken: token,
			ResponseCode: ptr(int32(resp.Status)), ResponseHeaders: headers, ResponseBody: resp.Body,
		})
	case run.RecoveryPoint() != start || !opened:
		rows, err = e.queries.IdempotencyKeyAdvance(ctx, tx, &dbsqlc.IdempotencyKeyAdvanceParams{
			ID: run.Key.ID, LockToken: token, RecoveryPoint: string(run.RecoveryPoint()),
		})
	default:
		// Only the lease was taken; the opener's own write fenced it.
		return nil
	}
	if err != nil {
		return fmt.Errorf("error recording recovery point: %w", err)
	}
	if rows == 0 {
		return ErrLeaseLost
	}
	return nil
}

// committedKey is the key as last committed, for a phase to start from.
// Before the first commit the run has no key yet and the opener provides it.
func (r *Run) committedKey() *dbsqlc.IdempotencyKey {
	if r.Key == nil {
		return &dbsqlc.IdempotencyKey{}
	}
	return r.Key
}

func ptr[T any](v T) *T { return &v }
