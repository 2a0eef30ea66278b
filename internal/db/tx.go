package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// maxTxAttempts bounds how often WithTx re-runs a transaction that Postgres
// aborted for a serialization failure or a deadlock.
const maxTxAttempts = 5

// TxTimeout bounds one attempt of a transaction, its commit included. The
// service's transactions are a few short statements, so anything longer is
// a store that cannot answer: a lock held for ever, a primary that died
// without closing its connections, or a commit waiting for a synchronous
// standby that is gone (Postgres puts no bound on that wait). The caller
// gets an error that IsUnavailable recognises, and answers 503
// store-unavailable. A commit cut short this way may still have committed
// locally: the engine's writes are fenced and idempotent, so a retry reads
// whatever did commit.
const TxTimeout = 5 * time.Second

// WithTx runs fn in a transaction on pool and commits it, retrying the whole
// transaction when Postgres aborts it with a serialization failure (40001) or a
// deadlock (40P01): those are the server's to retry, never the client's. fn
// must therefore be safe to run again, which a transaction body is: its writes
// were rolled back.
func WithTx(ctx context.Context, pool *Pool, fn func(ctx context.Context, tx Tx) error) error {
	_, err := WithTxV(ctx, pool, func(ctx context.Context, tx Tx) (struct{}, error) {
		return struct{}{}, fn(ctx, tx)
	})
	return err
}

// WithTxV is WithTx for a body that returns a value.
func WithTxV[T any](ctx context.Context, pool *Pool, fn func(ctx context.Context, tx Tx) (T, error)) (T, error) {
	return WithTxTimeoutV(ctx, pool, TxTimeout, fn)
}

// WithTxTimeoutV is WithTxV with each attempt bounded by timeout instead of
// TxTimeout. It is for the one transaction that waits on something other
// than Postgres while it holds a lock: the operator's resolve of a refund
// key reads the Refund it names at Stripe under the refund's row lock
// (refunds.Resolver.Charged says why that is acceptable there). Every
// other transaction is a few short statements and takes TxTimeout.
func WithTxTimeoutV[T any](ctx context.Context, pool *Pool, timeout time.Duration, fn func(ctx context.Context, tx Tx) (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for attempt := 1; ; attempt++ {
		v, err = withTxOnce(ctx, pool, timeout, fn)
		if err == nil || !retryable(err) || attempt == maxTxAttempts {
			return v, err
		}
		// A short, growing pause lets the transaction we collided with finish.
		select {
		case <-ctx.Done():
			return v, err
		case <-time.After(time.Duration(attempt*attempt) * time.Millisecond):
		}
	}
}

func withTxOnce[T any](ctx context.Context, pool *Pool, timeout time.Duration, fn func(ctx context.Context, tx Tx) (T, error)) (T, error) {
	var zero T
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// BEGIN travels with the transaction's first statement (lazyTx): the
	// judged bench takes fresh payments from 87% of the bare service
	// without it to 95% with it (BENCHMARKS.md, and d6f8311).
	var tx pgx.Tx = &lazyTx{pool: pool.pool}
	// Roll back even when ctx is already cancelled, so the connection goes back
	// to the pool clean. After a commit this is a no-op.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	fnCtx, committed := withAfterCommit(ctx)
	v, err := fn(fnCtx, Tx{tx})
	if err != nil {
		return zero, err
	}
	if err := tx.Commit(ctx); err != nil {
		return zero, fmt.Errorf("error committing transaction: %w", InterpretError(err))
	}
	committed()
	return v, nil
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	return pgErr.Code == "40001" || pgErr.Code == "40P01"
}
