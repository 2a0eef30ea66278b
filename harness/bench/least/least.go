// Package least holds the least schema that does a payment's job
// (schema.sql): the second yardstick of `make bench`, which reads the
// design's cost where the bare service over the service's own SQL reads
// the engine's. The bare service over it (harness/bench/bare, -sql least)
// and the pgbench scripts least.sql and least_replay.sql
// (harness/bench/pgbench) run on it; the service never does.
package least

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Schema creates the leastsql schema and its tables if they do not exist.
//
//go:embed schema.sql
var Schema string

// Create applies Schema to the database of pool, whose users table
// (public.users, the service's migrations') it refers to.
func Create(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, Schema); err != nil {
		return fmt.Errorf("error creating the least schema: %w", err)
	}
	return nil
}
