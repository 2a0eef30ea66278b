package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// ReaperArgs is the periodic job that ages finished keys out.
type ReaperArgs struct{}

// Kind names the job in River.
func (ReaperArgs) Kind() string { return "reaper" }

// ReaperConfig tunes the reaper.
type ReaperConfig struct {
	Interval time.Duration
	// Retention is how long finished keys stay replayable.
	Retention time.Duration
	// BatchSize bounds one DELETE, and so how long it holds its row locks.
	BatchSize int
	// MaxBatches bounds one run; the rest waits for the next.
	MaxBatches int
	// InstanceMaxAge forgets instances silent for this long.
	InstanceMaxAge time.Duration
}

func (c *ReaperConfig) setDefaults() {
	if c.Interval <= 0 {
		c.Interval = time.Minute
	}
	if c.Retention <= 0 {
		c.Retention = 24 * time.Hour
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 1000
	}
	if c.MaxBatches <= 0 {
		c.MaxBatches = 100
	}
	if c.InstanceMaxAge <= 0 {
		c.InstanceMaxAge = time.Hour
	}
}

// ReaperWorker deletes finished keys past retention in bounded batches that
// skip locked rows, so it never waits on the request path. It never deletes
// an unfinished key; payments and audit records keep their rows.
type ReaperWorker struct {
	river.WorkerDefaults[ReaperArgs]
	Pool   *pgxpool.Pool
	Config ReaperConfig
	Log    zerolog.Logger
	// Observe, when set, is told how many keys each run reaped.
	Observe func(reaped int64)
}

// Work reaps one run's worth of keys.
func (w *ReaperWorker) Work(ctx context.Context, _ *river.Job[ReaperArgs]) error {
	_, err := w.RunOnce(ctx)
	return err
}

// RunOnce deletes expired keys batch by batch and returns how many.
func (w *ReaperWorker) RunOnce(ctx context.Context) (int64, error) {
	w.Config.setDefaults()
	q := dbsqlc.New()
	var total int64
	for range w.Config.MaxBatches {
		n, err := q.IdempotencyKeyDeleteFinished(ctx, w.Pool, &dbsqlc.IdempotencyKeyDeleteFinishedParams{
			RetentionSeconds: w.Config.Retention.Seconds(),
			MaxKeys:          int32(w.Config.BatchSize),
		})
		if err != nil {
			return total, fmt.Errorf("error reaping keys: %w", err)
		}
		total += n
		if n < int64(w.Config.BatchSize) {
			break
		}
	}
	if _, err := q.InstanceDeleteStale(ctx, w.Pool, w.Config.InstanceMaxAge.Seconds()); err != nil {
		return total, fmt.Errorf("error forgetting stale instances: %w", err)
	}
	if total > 0 {
		w.Log.Info().Int64("reaped", total).Msg("reaped finished idempotency keys")
	}
	if w.Observe != nil {
		w.Observe(total)
	}
	return total, nil
}
