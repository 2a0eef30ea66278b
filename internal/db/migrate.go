package db

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/paymentsd/paymentsd/db/migrations"
)

// Migrator applies the embedded goose migrations through pool. Close the
// returned *sql.DB when done; it does not close the pool.
func Migrator(pool *pgxpool.Pool) (*goose.Provider, *sql.DB, error) {
	sqlDB := stdlib.OpenDBFromPool(pool)
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS,
		goose.WithGoMigrations(migrations.Go...))
	if err != nil {
		_ = sqlDB.Close()
		return nil, nil, fmt.Errorf("error loading migrations: %w", err)
	}
	return provider, sqlDB, nil
}

// MigrateUp applies every pending migration.
func MigrateUp(ctx context.Context, pool *pgxpool.Pool) error {
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
func PendingMigrations(ctx context.Context, pool *pgxpool.Pool) (bool, error) {
	provider, sqlDB, err := Migrator(pool)
	if err != nil {
		return false, err
	}
	defer sqlDB.Close()
	return provider.HasPending(ctx)
}

// Connect opens a pool for url and checks that the database answers.
func Connect(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("error parsing DATABASE_URL: %w", err)
	}
	return ConnectConfig(ctx, cfg)
}

// ConnectConfig opens a pool for cfg and checks that the database answers.
func ConnectConfig(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("error creating pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("error connecting to the database: %w", err)
	}
	return pool, nil
}
