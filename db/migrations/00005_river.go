package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// RiverSchemaVersion is the River schema version this history installs.
// Upgrading River's schema is a new goose migration that moves this pin, so
// goose stays the one history of the database.
const RiverSchemaVersion = 8

// Go holds the migrations written in Go: River's schema, applied by River's
// own migrator at a pinned version, inside goose's history.
var Go = []*goose.Migration{
	goose.NewGoMigration(5,
		&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
			return migrateRiver(ctx, db, rivermigrate.DirectionUp, RiverSchemaVersion)
		}},
		&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
			return migrateRiver(ctx, db, rivermigrate.DirectionDown, -1)
		}},
	),
}

// migrateRiver runs River's migrator on a connection of db (a pgx stdlib
// pool), one River version per transaction: some of River's migrations add
// an enum value that a later one uses, which Postgres refuses within one
// transaction.
func migrateRiver(ctx context.Context, db *sql.DB, direction rivermigrate.Direction, target int) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(driverConn any) error {
		stdConn, ok := driverConn.(*stdlib.Conn)
		if !ok {
			return errors.New("river migration needs the pgx stdlib driver")
		}
		migrator, err := rivermigrate.New(riverpgxv5.New(nil), nil)
		if err != nil {
			return err
		}
		for {
			done, err := migrateRiverStep(ctx, stdConn.Conn(), migrator, direction, target)
			if err != nil {
				return fmt.Errorf("error migrating River's schema: %w", err)
			}
			if done {
				return nil
			}
		}
	})
}

// migrateRiverStep applies one River migration in its own transaction and
// reports whether there was none left to apply.
func migrateRiverStep(ctx context.Context, conn *pgx.Conn, migrator *rivermigrate.Migrator[pgx.Tx], direction rivermigrate.Direction, target int) (bool, error) {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	opts := &rivermigrate.MigrateOpts{MaxSteps: 1}
	if direction == rivermigrate.DirectionUp {
		opts.TargetVersion = target
	}
	res, err := migrator.MigrateTx(ctx, tx, direction, opts)
	if err != nil {
		return false, err
	}
	return len(res.Versions) == 0, tx.Commit(ctx)
}
