package phases

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// runner is one run of a key through flow: the run, and the state its
// steps hand each other as last committed.
type runner[S any] struct {
	e     *Engine
	flow  Flow[S]
	run   *Run
	state S
}

// drive runs a key's flow to its end or to the first ambiguous outcome. open
// takes the lease inside the first transaction, so for a fresh key the
// reservation commits together with the local steps that follow it.
func (f Flow[S]) drive(ctx context.Context, e *Engine, open opener, fresh bool) (*Result, error) {
	r := &runner[S]{e: e, flow: f, run: &Run{Fresh: fresh, engine: e, token: uuid.New()}}
	res, err := r.drive(ctx, open)
	if errors.Is(err, ErrLeaseLost) && r.run.Key != nil {
		// This run wrote nothing after losing its lease; if the key
		// finished meanwhile (another run, or the remote party's own word
		// through a webhook), its stored answer is the answer.
		if key, rerr := e.queries.IdempotencyKeyGetByID(ctx, e.pool, r.run.Key.ID); rerr == nil && RecoveryPoint(key.RecoveryPoint) == Finished {
			return replay(stateOf(key))
		}
	}
	return res, err
}

// drive alternates phase transactions and foreign calls: the first phase
// takes the lease, each later one records the call before it, and each runs
// the local steps that follow.
func (r *runner[S]) drive(ctx context.Context, open opener) (*Result, error) {
	resp, err := r.commit(ctx, func(ctx context.Context, tx db.Tx, a *attempt[S]) error {
		return r.open(ctx, tx, a, open)
	})
	for {
		if err != nil {
			// A phase failed (the store, most likely) after this run had
			// committed under its lease: free the lease if the store lets
			// us, so a retry need not wait for it to go stale.
			if r.run.Key != nil && !errors.Is(err, ErrLeaseLost) {
				r.e.release(context.WithoutCancel(ctx), r.run, err)
			}
			return nil, err
		}
		if hook := r.e.cfg.Hooks.AfterCommit; hook != nil {
			if err := hook(ctx, r.run.RecoveryPoint()); err != nil {
				return nil, err
			}
		}
		if resp != nil {
			return &Result{Response: resp}, nil
		}
		var record recorder[S]
		if record, err = r.call(ctx); err != nil {
			return nil, err
		}
		resp, err = r.commit(ctx, func(ctx context.Context, tx db.Tx, a *attempt[S]) error {
			t, err := record(ctx, tx, a.run, &a.state)
			if err != nil {
				return fmt.Errorf("error recording the call at %q: %w", a.run.RecoveryPoint(), err)
			}
			return a.move(r.flow, t)
		})
	}
}

// open takes the key's lease in a's transaction and, for a key resumed past
// its first step, loads the state its steps left. A key this run creates is
// inserted where its first steps will leave it (Flow.reserveAt): the run
// still starts it at Started, and its row is written again only if the
// transaction ends elsewhere.
func (r *runner[S]) open(ctx context.Context, tx db.Tx, a *attempt[S], open opener) error {
	key, err := open(ctx, tx, a.run.token)
	if err != nil {
		return err
	}
	a.run.Key, a.stored = key, RecoveryPoint(key.RecoveryPoint)
	if a.run.Fresh {
		a.run.Key.RecoveryPoint = string(Started)
	}
	if key.LockedAt != nil {
		a.run.dbLeasedAt, a.run.localLeasedAt = *key.LockedAt, a.begun
	}
	if a.run.RecoveryPoint() == Started || r.flow.Load == nil {
		return nil
	}
	if a.state, err = r.flow.Load(ctx, tx, a.run); err != nil {
		return fmt.Errorf("error loading the state of flow %q: %w", r.flow.Name, err)
	}
	return nil
}

// call makes the foreign call of the step at the run's recovery point, within
// the run's lease: a call is never started after the lease could have been
// taken over. On an ambiguous outcome it frees the lease, so the next retry
// resumes at once; a call that says its key needs attention parks the key.
func (r *runner[S]) call(ctx context.Context) (recorder[S], error) {
	e, run := r.e, r.run
	point := run.RecoveryPoint()
	i, err := r.flow.stepAt(point)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	callCtx, cancel := context.WithDeadline(ctx, run.leasedAt.Add(e.cfg.LeaseTimeout))
	record, err := r.flow.Steps[i].call(callCtx, run, &r.state)
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
	return record, nil
}

// attempt is one try at a phase transaction: a copy of the run and its
// state, which become the run's only if the transaction commits (a retried
// transaction starts again from what was committed).
type attempt[S any] struct {
	run   *Run
	state S
	// resp is the flow's answer once a step finished it.
	resp *Response
	// begun is when the transaction began, by this process's clock.
	begun time.Time
	// stored is where the key's row stands in this transaction: where the
	// transaction found it, or where it inserted it. Once a step moved the
	// key elsewhere, the transaction records where, fenced by the lease.
	stored RecoveryPoint
}

// move applies a step's transition to the attempt's key.
func (a *attempt[S]) move(flow Flow[S], t Transition) error {
	if t.finished {
		if t.response == nil {
			return fmt.Errorf("flow %q finished at %q without a response", flow.Name, a.run.RecoveryPoint())
		}
		a.run.Key.RecoveryPoint, a.resp = string(Finished), t.response
		return nil
	}
	i, err := flow.stepAt(a.run.RecoveryPoint())
	if err != nil {
		return err
	}
	if i+1 == len(flow.Steps) {
		return fmt.Errorf("flow %q: its last step, at %q, went on instead of finishing", flow.Name, a.run.RecoveryPoint())
	}
	a.run.Key.RecoveryPoint = string(flow.Steps[i+1].at)
	return nil
}

// commit runs one phase transaction: first (taking the lease, or recording
// a call), then every following step that has no foreign call, and finally
// one fenced write of where the key now stands, unless its row says so
// already (a new key inserted where its first steps took it). It stops
// before a step with a call, and returns the response when the flow
// finished.
func (r *runner[S]) commit(ctx context.Context, first func(ctx context.Context, tx db.Tx, a *attempt[S]) error) (*Response, error) {
	start := time.Now()
	a, err := db.WithTxV(ctx, r.e.pool, func(ctx context.Context, tx db.Tx) (*attempt[S], error) {
		run := *r.run
		if r.run.Key != nil {
			key := *r.run.Key
			run.Key = &key
		}
		a := &attempt[S]{run: &run, state: r.state, begun: start}
		if run.Key != nil {
			a.stored = run.RecoveryPoint()
		}
		if err := first(ctx, tx, a); err != nil {
			return nil, err
		}
		for a.resp == nil {
			i, err := r.flow.stepAt(a.run.RecoveryPoint())
			if err != nil {
				return nil, err
			}
			step := r.flow.Steps[i]
			if step.local == nil {
				break // the call must happen outside this transaction
			}
			t, err := step.local(ctx, tx, a.run, &a.state)
			if err != nil {
				return nil, fmt.Errorf("error applying step at %q: %w", step.at, err)
			}
			if err := a.move(r.flow, t); err != nil {
				return nil, err
			}
		}
		if a.resp != nil || a.run.RecoveryPoint() != a.stored {
			if err := r.e.fence(ctx, tx, a.run, a.resp); err != nil {
				return nil, err
			}
		}
		return a, nil
	})
	if err != nil {
		return nil, err
	}
	r.run, r.state = a.run, a.state
	r.run.leasedAt = start
	took := time.Since(start)
	r.e.cfg.Observer.PhaseCommitted(r.run.RecoveryPoint(), took)
	zerolog.Ctx(ctx).Debug().Int64("idempotency_key_id", r.run.Key.ID).Str("recovery_point", string(r.run.RecoveryPoint())).
		Dur("took", took).Msg("phase committed")
	return a.resp, nil
}

// fence writes the run's new recovery point, or its final response, under the
// run's lease. Zero rows updated means another run holds the key now: the
// transaction rolls back and this run stops.
func (e *Engine) fence(ctx context.Context, tx db.Tx, run *Run, resp *Response) error {
	token := uuid.NullUUID{UUID: run.token, Valid: true}
	var (
		rows int64
		err  error
	)
	if resp != nil {
		var headers []byte
		if headers, err = resp.headersJSON(); err != nil {
			return fmt.Errorf("error encoding response headers: %w", err)
		}
		rows, err = e.queries.IdempotencyKeyFinish(ctx, tx, &dbsqlc.IdempotencyKeyFinishParams{
			ID: run.Key.ID, LockToken: token,
			ResponseCode: ptr(int32(resp.Status)), ResponseHeaders: headers, ResponseBody: resp.Body,
		})
	} else {
		rows, err = e.queries.IdempotencyKeyAdvance(ctx, tx, &dbsqlc.IdempotencyKeyAdvanceParams{
			ID: run.Key.ID, LockToken: token, RecoveryPoint: string(run.RecoveryPoint()),
		})
	}
	if err != nil {
		return fmt.Errorf("error recording recovery point: %w", err)
	}
	if rows == 0 {
		return ErrLeaseLost
	}
	return nil
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
		return &AmbiguousError{Point: run.RecoveryPoint(), Err: fmt.Errorf("error parking key for an operator: %w", err)}
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

func ptr[T any](v T) *T { return &v }
