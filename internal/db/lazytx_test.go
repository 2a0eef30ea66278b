package db_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// sent records what a pool sends: each query on its own, each batch as its
// queries joined by " + ".
type sent struct {
	mu   sync.Mutex
	sent []string
}

func (s *sent) add(q string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, q)
}

func (s *sent) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.add(d.SQL)
	return ctx
}
func (s *sent) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (s *sent) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var qs []string
	for _, q := range d.Batch.QueuedQueries {
		qs = append(qs, q.SQL)
	}
	s.add(strings.Join(qs, " + "))
	return ctx
}
func (s *sent) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *sent) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (s *sent) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sent
	s.sent = nil
	return out
}

// traced is a pool on a fresh database that records what it sends, with a
// table to write to.
func traced(t *testing.T) (*db.Pool, *sent) {
	t.Helper()
	cfg := testutil.NewDB(t).Driver().Config()
	s := &sent{}
	cfg.ConnConfig.Tracer = s
	cfg.MaxConns = 1
	pool := testutil.ConnectConfig(t, cfg)
	_, err := pool.Exec(context.Background(), "CREATE TABLE t (id int PRIMARY KEY)")
	require.NoError(t, err)
	s.take()
	return pool, s
}

func TestATransactionsBeginTravelsWithItsFirstStatement(t *testing.T) {
	t.Parallel()
	pool, s := traced(t)
	ctx := context.Background()
	err := db.WithTx(ctx, pool, func(ctx context.Context, tx db.Tx) error {
		require.Zero(t, pool.Driver().Stat().AcquiredConns(), "no connection is taken before the first statement")
		if _, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", 1); err != nil {
			return err
		}
		var n int
		return tx.QueryRow(ctx, "SELECT count(*) FROM t WHERE id > $1", 0).Scan(&n)
	})
	require.NoError(t, err)
	require.Equal(t, []string{"begin + INSERT INTO t VALUES ($1)", "SELECT count(*) FROM t WHERE id > $1", "commit"}, s.take())
	require.Zero(t, pool.Driver().Stat().AcquiredConns(), "the connection went back")

	// A first statement that reads rows carries BEGIN too.
	err = db.WithTx(ctx, pool, func(ctx context.Context, tx db.Tx) error {
		var n int
		return tx.QueryRow(ctx, "SELECT count(*) FROM t WHERE id > $1", 0).Scan(&n)
	})
	require.NoError(t, err)
	require.Equal(t, []string{"begin + SELECT count(*) FROM t WHERE id > $1", "commit"}, s.take())

	// A transaction with no statement sends nothing.
	require.NoError(t, db.WithTx(ctx, pool, func(context.Context, db.Tx) error { return nil }))
	require.Empty(t, s.take())
}

func TestALazyTransactionIsAllOrNothing(t *testing.T) {
	t.Parallel()
	pool, _ := traced(t)
	ctx := context.Background()
	count := func() int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n))
		return n
	}

	// The second statement fails: the first one's row is rolled back.
	err := db.WithTx(ctx, pool, func(ctx context.Context, tx db.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", 1); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", 1)
		return err
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "23505", pgErr.Code)
	require.Zero(t, count())

	// A body that swallows a failed statement cannot commit what came
	// before it: the server rolled the transaction back.
	err = db.WithTx(ctx, pool, func(ctx context.Context, tx db.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", 2); err != nil {
			return err
		}
		_, _ = tx.Exec(ctx, "INSERT INTO t VALUES ($1)", 2)
		return nil
	})
	require.True(t, errors.Is(err, pgx.ErrTxCommitRollback), "got %v", err)
	require.Zero(t, count())

	// The first statement fails: nothing stays open, and the next
	// transaction on the one connection works.
	err = db.WithTx(ctx, pool, func(ctx context.Context, tx db.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO missing VALUES ($1)", 1)
		return err
	})
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "42P01", pgErr.Code)
	require.NoError(t, db.WithTx(ctx, pool, func(ctx context.Context, tx db.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO t VALUES ($1)", 3)
		return err
	}))
	require.Equal(t, 1, count())

	// Several statements without arguments as the first: the simple
	// protocol, BEGIN on its own.
	require.NoError(t, db.WithTx(ctx, pool, func(ctx context.Context, tx db.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO t VALUES (4); INSERT INTO t VALUES (5)")
		return err
	}))
	require.Equal(t, 3, count())
}
