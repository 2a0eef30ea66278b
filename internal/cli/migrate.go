package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pressly/goose/v3"

	"github.com/paymentsd/paymentsd/internal/db"
)

func migrateCmd(ctx context.Context, args []string, stdout io.Writer) error {
	args, err := parseArgs(newFlagSet("migrate"), args)
	if err != nil {
		return err
	}
	direction := "up"
	switch len(args) {
	case 0:
	case 1:
		direction = args[0]
		if err := oneOf("the direction", direction, "up", "down", "status"); err != nil {
			return err
		}
	default:
		return usageErrorf("unexpected argument %q after %s", args[1], args[0])
	}
	pool, err := connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	provider, sqlDB, err := db.Migrator(pool)
	if err != nil {
		return err
	}
	defer sqlDB.Close()

	switch direction {
	case "up":
		results, err := provider.Up(ctx)
		for _, r := range results {
			fmt.Fprintf(stdout, "applied %s (%s)\n", sourceName(r.Source), r.Duration)
		}
		if err != nil {
			return fmt.Errorf("error migrating up: %w", err)
		}
		if len(results) == 0 {
			fmt.Fprintln(stdout, "no pending migrations")
		}
	case "down":
		r, err := provider.Down(ctx)
		if err != nil {
			return fmt.Errorf("error migrating down: %w", err)
		}
		fmt.Fprintf(stdout, "rolled back %s (%s)\n", sourceName(r.Source), r.Duration)
	case "status":
		statuses, err := provider.Status(ctx)
		if err != nil {
			return fmt.Errorf("error reading migration status: %w", err)
		}
		for _, s := range statuses {
			applied := "pending"
			if !s.AppliedAt.IsZero() {
				applied = s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
			}
			fmt.Fprintf(stdout, "%-40s %s\n", sourceName(s.Source), applied)
		}
	}
	return nil
}

func connect(ctx context.Context) (*db.Pool, error) {
	url := os.Getenv("DATABASE_URL")
	if url == "" {
		return nil, errors.New("DATABASE_URL is required")
	}
	return db.Connect(ctx, url)
}

// sourceName names a migration: its file, or for a Go migration registered
// without one, its version.
func sourceName(src *goose.Source) string {
	if src.Path != "" {
		return src.Path
	}
	return fmt.Sprintf("%05d (Go migration)", src.Version)
}
