package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// Pool is the service's connection pool seen through the database edge: a
// statement run on it, or on a transaction WithTx opens on it, answers with
// this package's errors (ErrNotFound, ErrUnavailable, the driver's error for
// anything else), so the sqlc queries above it never hand pgx.ErrNoRows or
// a connection failure to their callers untranslated.
type Pool struct{ pool *pgxpool.Pool }

// NewPool puts pool behind the edge.
func NewPool(pool *pgxpool.Pool) *Pool { return &Pool{pool: pool} }

// Driver is the pgx pool itself, for a library that takes one (River, goose)
// and for its statistics. What it returns is not translated.
func (p *Pool) Driver() *pgxpool.Pool { return p.pool }

// Close closes the pool.
func (p *Pool) Close() { p.pool.Close() }

func (p *Pool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return exec(ctx, p.pool, sql, args)
}

func (p *Pool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return query(ctx, p.pool, sql, args)
}

func (p *Pool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return row{p.pool.QueryRow(ctx, sql, args...)}
}

// Tx is a transaction seen through the database edge (see Pool). WithTx
// opens it.
type Tx struct{ tx pgx.Tx }

// Driver is the pgx transaction itself, for a library that joins it
// (River's InsertTx). What it returns is not translated.
func (t Tx) Driver() pgx.Tx { return t.tx }

func (t Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return exec(ctx, t.tx, sql, args)
}

func (t Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return query(ctx, t.tx, sql, args)
}

func (t Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return row{t.tx.QueryRow(ctx, sql, args...)}
}

// Both sides of the edge run sqlc's queries.
var (
	_ dbsqlc.DBTX = (*Pool)(nil)
	_ dbsqlc.DBTX = Tx{}
)

func exec(ctx context.Context, on dbsqlc.DBTX, sql string, args []any) (pgconn.CommandTag, error) {
	tag, err := on.Exec(ctx, sql, args...)
	return tag, InterpretError(err)
}

func query(ctx context.Context, on dbsqlc.DBTX, sql string, args []any) (pgx.Rows, error) {
	rs, err := on.Query(ctx, sql, args...)
	if err != nil {
		return rs, InterpretError(err)
	}
	return rows{rs}, nil
}

// row translates the error of a one-row query, which pgx reports on Scan.
type row struct{ pgx.Row }

func (r row) Scan(dest ...any) error { return InterpretError(r.Row.Scan(dest...)) }

// rows translates the errors of a many-row query, which pgx reports on Scan
// and Err.
type rows struct{ pgx.Rows }

func (r rows) Scan(dest ...any) error { return InterpretError(r.Rows.Scan(dest...)) }
func (r rows) Err() error             { return InterpretError(r.Rows.Err()) }

// Savepoint is a savepoint of a transaction: what is run on it is undone by
// Rollback, or kept, with the transaction, by Release.
type Savepoint struct{ Tx }

// Savepoint takes a savepoint of t.
func (t Tx) Savepoint(ctx context.Context) (Savepoint, error) {
	sp, err := t.tx.Begin(ctx)
	return Savepoint{Tx{sp}}, InterpretError(err)
}

// Release keeps what was run on the savepoint.
func (s Savepoint) Release(ctx context.Context) error { return InterpretError(s.tx.Commit(ctx)) }

// Rollback undoes what was run on the savepoint.
func (s Savepoint) Rollback(ctx context.Context) error { return InterpretError(s.tx.Rollback(ctx)) }
