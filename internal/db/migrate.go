package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/paymentsd/paymentsd/db/migrations"
)

// Migrator applies the embedded goose migrations through pool. Close the
// returned *sql.DB when done; it does not close the pool.
func Migrator(pool *Pool) (*goose.Provider, *sql.DB, error) {
	sqlDB := stdlib.OpenDBFromPool(pool.pool)
	// One migrator at a time per database (a session advisory lock): two
	// processes started with --migrate must not interleave the statements
	// of a migration that runs outside a transaction (00016's concurrent
	// index builds), where one could cancel the other's build.
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		_ = sqlDB.Close()
		return nil, nil, fmt.Errorf("error creating the migration lock: %w", err)
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS,
		goose.WithGoMigrations(migrations.Go...), goose.WithSessionLocker(locker))
	if err != nil {
		_ = sqlDB.Close()
		return nil, nil, fmt.Errorf("error loading migrations: %w", err)
	}
	return provider, sqlDB, nil
}

// MigrateUp applies every pending migration.
func MigrateUp(ctx context.Context, pool *Pool) error {
	provider, sqlDB, err := Migrator(pool)
	if err != nil {
		return err
	}
	defer sqlDB.Close()
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("error migrating: %w", err)
	}
	return nil
}

// PendingMigrations reports whether the database lags the binary.
func PendingMigrations(ctx context.Context, pool *Pool) (bool, error) {
	provider, sqlDB, err := Migrator(pool)
	if err != nil {
		return false, err
	}
	defer sqlDB.Close()
	return provider.HasPending(ctx)
}

// Connect opens a pool for url (ParseConfig) and checks that the database
// answers.
func Connect(ctx context.Context, url string) (*Pool, error) {
	cfg, err := ParseConfig(url)
	if err != nil {
		return nil, err
	}
	return ConnectConfig(ctx, cfg)
}

// ParseConfig is the pool configuration of DATABASE_URL url, with
// paymentsd's defaults for what the URL leaves unset, and FollowTimeline
// run on every new connection.
//
// The URL may name several hosts, as in
// postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write: a new
// connection then tries them in order and keeps the first that accepts
// writes, so after a failover the pool's new connections find the promoted
// standby by themselves.
func ParseConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("error parsing DATABASE_URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgx defaults to max(4, cores) connections, which queues requests
		// long before Postgres is busy: a request holds a connection only
		// for its two short transactions, never across the Stripe call, and
		// commits from several connections share one WAL flush.
		cfg.MaxConns = DefaultMaxConns
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// Without a bound, a host that drops packets (a dead machine, a
		// partition) holds every new connection until the request's own
		// deadline, and the next host is never tried.
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	cfg.AfterConnect = FollowTimeline
	return cfg, nil
}

// DefaultMaxConns is the pool size when DATABASE_URL sets no pool_max_conns.
const DefaultMaxConns = 16

// DefaultConnectTimeout bounds the connection to each host of DATABASE_URL
// when it sets no connect_timeout.
const DefaultConnectTimeout = 5 * time.Second

// ConnectConfig opens a pool for cfg and checks that the database answers.
func ConnectConfig(ctx context.Context, cfg *pgxpool.Config) (*Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("error creating pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("error connecting to the database: %w", InterpretError(err))
	}
	return NewPool(pool), nil
}

// SchemaCurrent reports whether every migration this binary carries is
// applied: one cheap query, fit for a readiness probe.
func SchemaCurrent(ctx context.Context, pool *Pool) (bool, error) {
	var applied int64
	err := pool.QueryRow(ctx,
		"SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied").Scan(&applied)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // no goose table: nothing applied
			return false, nil
		}
		return false, err
	}
	return applied >= latestVersion(), nil
}

// latestVersion is the highest migration version the binary carries.
func latestVersion() int64 {
	var latest int64
	entries, _ := fs.ReadDir(migrations.FS, ".")
	for _, e := range entries {
		if v, err := goose.NumericComponent(e.Name()); err == nil && v > latest {
			latest = v
		}
	}
	for _, m := range migrations.Go {
		latest = max(latest, m.Version)
	}
	return latest
}
