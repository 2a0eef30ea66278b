package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// vacuum runs VACUUM (ANALYZE) over the bench database before each run of
// a pair (the service's and the bare service's), outside the readings that
// bracket the commit accounting. Autovacuum wakes once a minute and works
// off the rows the previous runs left: without this it fell on whichever
// run was measuring at that minute, a share of two cores taken from one of
// the pair and not the other. It does nothing without a bench database.
func (m *measurer) vacuum(ctx context.Context) error {
	if m.cfg.BenchURL == "" {
		return nil
	}
	start := time.Now()
	conn, err := pgx.Connect(ctx, m.cfg.BenchURL)
	if err != nil {
		return fmt.Errorf("error connecting to %s: %w", redact(m.cfg.BenchURL), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `VACUUM (ANALYZE)`); err != nil {
		return fmt.Errorf("error vacuuming the bench database: %w", err)
	}
	if took := time.Since(start); took > time.Second {
		logf(m.cfg.Log, "  vacuumed the bench database in %s", took.Round(time.Millisecond))
	}
	return nil
}
