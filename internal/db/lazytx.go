package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// lazyTx is a transaction on a pool that takes its connection and sends its
// BEGIN with its first statement, in one round trip (pgx.Batch.BeginTx),
// instead of acquiring a connection and sending BEGIN on its own: one
// round trip less for every transaction WithTx runs on a pool. A request
// holds a pooled connection for its transactions' round trips, so under
// load every one saved is connection time given back to the others.
//
// From its first statement on it is the pool's own transaction (pgxpool.Tx):
// Commit commits it and Rollback rolls it back, each releasing the
// connection. Before it, nothing has been sent, and Commit or Rollback has
// nothing to end.
type lazyTx struct {
	pool  *pgxpool.Pool
	inner pgx.Tx // the transaction, once begun
	ended bool
}

var _ pgx.Tx = (*lazyTx)(nil)

var errTxEnded = errors.New("transaction has already been committed or rolled back")

// first sends BEGIN and sql in one batch, keeps the transaction, and
// returns the batch with BEGIN's result read; the caller reads sql's result
// and closes the batch.
func (t *lazyTx) first(ctx context.Context, sql string, args []any) (pgx.BatchResults, error) {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(sql, args...)
	br := t.pool.SendBatch(ctx, b)
	t.inner = br.Tx()
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, err
	}
	return br, nil
}

// begun is the transaction, begun on its own for the calls that cannot
// carry BEGIN along.
func (t *lazyTx) begun(ctx context.Context) (pgx.Tx, error) {
	switch {
	case t.ended:
		return nil, errTxEnded
	case t.inner == nil:
		tx, err := t.pool.Begin(ctx)
		if err != nil {
			return nil, err
		}
		t.inner = tx
	}
	return t.inner, nil
}

func (t *lazyTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	switch {
	case t.ended:
		return pgconn.CommandTag{}, errTxEnded
	case t.inner != nil:
		return t.inner.Exec(ctx, sql, args...)
	case len(args) == 0:
		// pgx runs an Exec without arguments in the simple protocol, which
		// takes several statements at once; a batch would refuse them.
		tx, err := t.begun(ctx)
		if err != nil {
			return pgconn.CommandTag{}, err
		}
		return tx.Exec(ctx, sql)
	}
	br, err := t.first(ctx, sql, args)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

func (t *lazyTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	switch {
	case t.ended:
		return nil, errTxEnded
	case t.inner != nil:
		return t.inner.Query(ctx, sql, args...)
	}
	br, err := t.first(ctx, sql, args)
	if err != nil {
		return nil, err
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, batch: br}, nil
}

func (t *lazyTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	return &firstRow{rows: rows, err: err}
}

// batchRows are the rows of a batch's last query; closing them closes the
// batch.
type batchRows struct {
	pgx.Rows
	batch pgx.BatchResults
}

func (r *batchRows) Close() {
	r.Rows.Close()
	_ = r.batch.Close()
}

// firstRow is pgx.Row over rows: the first row, or pgx.ErrNoRows.
type firstRow struct {
	rows pgx.Rows
	err  error
}

func (r *firstRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

func (t *lazyTx) Commit(ctx context.Context) error {
	if t.ended {
		return errTxEnded
	}
	t.ended = true
	if t.inner == nil {
		return nil
	}
	return t.inner.Commit(ctx)
}

func (t *lazyTx) Rollback(ctx context.Context) error {
	if t.ended {
		return pgx.ErrTxClosed
	}
	t.ended = true
	if t.inner == nil {
		return nil
	}
	return t.inner.Rollback(ctx)
}

func (t *lazyTx) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Begin(ctx)
}

func (t *lazyTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return 0, err
	}
	return tx.CopyFrom(ctx, table, columns, src)
}

func (t *lazyTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	tx, err := t.begun(ctx)
	if err != nil {
		return pgx.FailedBatchResults(b, err)
	}
	return tx.SendBatch(ctx, b)
}

// LargeObjects needs the transaction begun already (it has no context to
// begin it with): use another call first.
func (t *lazyTx) LargeObjects() pgx.LargeObjects {
	if t.inner == nil {
		panic("db: LargeObjects on a transaction that has not begun")
	}
	return t.inner.LargeObjects()
}

func (t *lazyTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	tx, err := t.begun(ctx)
	if err != nil {
		return nil, err
	}
	return tx.Prepare(ctx, name, sql)
}

// Conn is the transaction's connection: nil until it has begun.
func (t *lazyTx) Conn() *pgx.Conn {
	if t.inner == nil {
		return nil
	}
	return t.inner.Conn()
}
