package phases

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// Checkpoint runs fn in a transaction that renews the run's lease, fenced
// like every other write of the run. A step's Call uses it to record how far
// a long call got (a spent remote attempt, say), so a later run does not
// repeat it. If another run took the key over, nothing fn wrote commits and
// Checkpoint returns ErrLeaseLost.
//
// fn runs first and the lease is renewed after it, in the same transaction:
// fn locks the flow's own row (a payment, a refund), and a webhook settling
// that row locks it before the key (ClaimForEvent), so both take the flow's
// row first and cannot deadlock. Renewing first took the key, then the row:
// the opposite order, a cycle Postgres breaks with a deadlock error and a
// retry after deadlock_timeout. fn's writes under a lost lease roll back
// with the renewal that finds it lost.
func (r *Run) Checkpoint(ctx context.Context, fn func(ctx context.Context, tx db.Tx) error) error {
	start := time.Now()
	err := db.WithTx(ctx, r.engine.pool, func(ctx context.Context, tx db.Tx) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		rows, err := r.engine.queries.IdempotencyKeyRenewLease(ctx, tx, &dbsqlc.IdempotencyKeyRenewLeaseParams{
			ID: r.Key.ID, LockToken: r.lockToken(),
		})
		switch {
		case err != nil:
			return fmt.Errorf("error renewing lease: %w", err)
		case rows == 0:
			return ErrLeaseLost
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.leasedAt = start
	return nil
}

// Settler decides, in the settling transaction, what a parked key answers
// from now on: it updates the flow's own rows and returns the response to
// store.
type Settler func(ctx context.Context, tx db.Tx, key *dbsqlc.IdempotencyKey) (*Response, error)

// Settle finishes a key that awaits an operator: settle runs in the same
// transaction that locks the key and stores its answer, so the key's answer
// and the flow's rows change together. It returns ErrNotAwaitingOperator
// when the key does not exist or is not parked.
func (e *Engine) Settle(ctx context.Context, keyID int64, settle Settler) (*Response, error) {
	return e.SettleAfter(ctx, keyID, nil, settle)
}

// SettleAfter is Settle with first (unless nil) run in the transaction
// before the key is locked: a flow locks its own row there (the payment
// the key acts on), because a webhook settling that row locks it before
// the key, and the operator must take them in the same order or the two
// can deadlock. settle then finds the row locked already.
func (e *Engine) SettleAfter(ctx context.Context, keyID int64, first func(ctx context.Context, tx db.Tx) error, settle Settler) (*Response, error) {
	return e.SettleAfterWithin(ctx, keyID, db.TxTimeout, first, settle)
}

// SettleAfterWithin is SettleAfter with each attempt of its transaction
// bounded by timeout instead of db.TxTimeout (db.WithTxTimeoutV): for a
// first that reads the remote party under its row lock, which only the
// refunds resolver does (refunds.Resolver.Charged says why).
func (e *Engine) SettleAfterWithin(ctx context.Context, keyID int64, timeout time.Duration, first func(ctx context.Context, tx db.Tx) error, settle Settler) (*Response, error) {
	return db.WithTxTimeoutV(ctx, e.pool, timeout, func(ctx context.Context, tx db.Tx) (*Response, error) {
		if first != nil {
			if err := first(ctx, tx); err != nil {
				return nil, err
			}
		}
		key, err := e.queries.IdempotencyKeyLockNeedsAttention(ctx, tx, keyID)
		if err != nil {
			if errors.Is(err, db.ErrNotFound) {
				return nil, ErrNotAwaitingOperator
			}
			return nil, fmt.Errorf("error locking idempotency key: %w", err)
		}
		resp, err := settle(ctx, tx, key)
		if err != nil {
			return nil, err
		}
		headers, err := resp.headersJSON()
		if err != nil {
			return nil, fmt.Errorf("error encoding response headers: %w", err)
		}
		if _, err := e.queries.IdempotencyKeyFinishSettled(ctx, tx, &dbsqlc.IdempotencyKeyFinishSettledParams{
			ID: key.ID, ResponseCode: ptr(int32(resp.Status)), ResponseHeaders: headers, ResponseBody: resp.Body,
		}); err != nil {
			return nil, fmt.Errorf("error storing settled response: %w", err)
		}
		return resp, nil
	})
}

// lockToken is the run's lease token as the queries take it.
func (r *Run) lockToken() uuid.NullUUID { return uuid.NullUUID{UUID: r.token, Valid: true} }

// ClaimForEvent locks key keyID in tx for an event of the remote party's
// that would settle it, before the event changes anything. It returns an
// *AlarmError when the key awaits an operator because of a conflict: such a
// key is the operator's alone, and the event must change nothing.
func (e *Engine) ClaimForEvent(ctx context.Context, tx db.Tx, keyID int64) error {
	key, err := e.queries.IdempotencyKeyLockForEvent(ctx, tx, keyID)
	if err != nil {
		return fmt.Errorf("error locking idempotency key %d: %w", keyID, err)
	}
	if key.NeedsAttentionKind != nil && *key.NeedsAttentionKind == AttentionConflict {
		why := ""
		if key.LastError != nil {
			why = *key.LastError
		}
		return Alarm("idempotency key %d awaits an operator for a conflict (%s); the event does not settle it", keyID, why)
	}
	return nil
}

// Reopen hands finished key keyID back to an operator, in tx, because the
// remote party's word contradicts the answer it stored: from now on it
// answers 503 needs-attention, not the wrong answer, until an operator
// settles it (Settle). point is where its flow's outcome is unknown. It
// reports false when the key was not finished.
func (e *Engine) Reopen(ctx context.Context, tx db.Tx, keyID int64, point RecoveryPoint, reason string) (bool, error) {
	rows, err := e.queries.IdempotencyKeyReopenForOperator(ctx, tx, &dbsqlc.IdempotencyKeyReopenForOperatorParams{
		ID: keyID, Point: string(point), LastError: ptr(truncate(reason, maxErrorLen)),
	})
	if err != nil {
		return false, fmt.Errorf("error handing idempotency key %d to an operator: %w", keyID, err)
	}
	if rows == 1 {
		db.AfterCommit(ctx, e.cfg.Observer.NeedsAttention)
	}
	return rows == 1, nil
}

// FinishFromOutside finishes key keyID with resp in tx, whatever its lease,
// because the remote party itself settled its outcome (a webhook). A run
// still holding the lease then fails its fence and writes nothing. Call
// ClaimForEvent first: a key parked for a conflict is not finished here. It
// reports false when the key was finished already (or is an operator's).
func (e *Engine) FinishFromOutside(ctx context.Context, tx db.Tx, keyID int64, resp *Response) (bool, error) {
	headers, err := resp.headersJSON()
	if err != nil {
		return false, fmt.Errorf("error encoding response headers: %w", err)
	}
	rows, err := e.queries.IdempotencyKeyFinishFromOutside(ctx, tx, &dbsqlc.IdempotencyKeyFinishFromOutsideParams{
		ID: keyID, ResponseCode: ptr(int32(resp.Status)), ResponseHeaders: headers, ResponseBody: resp.Body,
	})
	if err != nil {
		return false, fmt.Errorf("error finishing idempotency key: %w", err)
	}
	return rows == 1, nil
}
