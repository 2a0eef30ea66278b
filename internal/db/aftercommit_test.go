package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestAfterCommitCountsWhatCommitted: a function handed to AfterCommit
// runs once the transaction commits: not for an attempt that Postgres
// aborted and WithTx ran again, not for a transaction that rolled back,
// and not for a savepoint rolled back within one that committed.
func TestAfterCommitCountsWhatCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testutil.NewDB(t)
	var n int
	count := func() { n++ }

	attempts := 0
	require.NoError(t, db.WithTx(ctx, pool, func(ctx context.Context, tx db.Tx) error {
		attempts++
		db.AfterCommit(ctx, count)
		if attempts == 1 {
			return &pgconn.PgError{Code: "40P01", Message: "deadlock detected"}
		}
		require.Zero(t, n, "not before the commit")
		return nil
	}))
	require.Equal(t, 2, attempts)
	require.Equal(t, 1, n, "the retried attempt counts once")

	errBody := errors.New("rolled back")
	require.ErrorIs(t, db.WithTx(ctx, pool, func(ctx context.Context, tx db.Tx) error {
		db.AfterCommit(ctx, count)
		return errBody
	}), errBody)
	require.Equal(t, 1, n, "a rollback counts nothing")

	require.NoError(t, db.WithTx(ctx, pool, func(ctx context.Context, tx db.Tx) error {
		for _, keep := range []bool{false, true} {
			spCtx, done := db.SavepointScope(ctx)
			db.AfterCommit(spCtx, count)
			done(keep)
		}
		return nil
	}))
	require.Equal(t, 2, n, "only the kept savepoint counts")

	db.AfterCommit(ctx, count)
	require.Equal(t, 3, n, "outside a transaction, at once")
}
