package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// ReaperArgs is the periodic job that ages finished keys out.
type ReaperArgs struct{}

// Kind names the job in River.
func (ReaperArgs) Kind() string { return "reaper" }

// TombstoneRetentionDefault is how long a reaped key's tombstone is kept by
// default: for 90 days after its key is reaped, a retry with the key is
// refused instead of run again.
const TombstoneRetentionDefault = 90 * 24 * time.Hour

// ReaperConfig tunes the reaper.
type ReaperConfig struct {
	// Interval is how often the job runs. Defaults to a minute.
	Interval time.Duration
	// Retention is how long finished keys stay replayable. Defaults to
	// 24 hours.
	Retention time.Duration
	// TombstoneRetention is how long a reaped key's tombstone is kept,
	// counted from the reaping: while it is, a retry with the key is
	// refused (phases.KeyExpiredError) rather than run again. Keep it well
	// past the processor's own idempotency window (Stripe's 24 hours):
	// Stripe keys derive from the client's key, so a key that is new again
	// must not meet Stripe's cached answer for its first use. Defaults to
	// TombstoneRetentionDefault.
	TombstoneRetention time.Duration
	// BatchSize bounds one statement, and so how long it holds its row
	// locks. Defaults to 1000.
	BatchSize int
	// MaxBatches bounds one run, for keys and for tombstones each; the rest
	// waits for the next run. Defaults to 100.
	MaxBatches int
	// InstanceMaxAge forgets instances silent for this long. Defaults to an
	// hour.
	InstanceMaxAge time.Duration
}

func (c *ReaperConfig) setDefaults() {
	if c.Interval <= 0 {
		c.Interval = time.Minute
	}
	if c.Retention <= 0 {
		c.Retention = 24 * time.Hour
	}
	if c.TombstoneRetention <= 0 {
		c.TombstoneRetention = TombstoneRetentionDefault
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

// ReaperWorker moves finished keys past retention to tombstones, and deletes
// tombstones past theirs, in bounded batches that skip locked rows, so it
// never waits on the request path. It never deletes an unfinished key;
// payments and audit records keep their rows.
type ReaperWorker struct {
	river.WorkerDefaults[ReaperArgs]
	Pool   *db.Pool
	Config ReaperConfig
	Log    zerolog.Logger
	// Observe, when set, is told how many keys each run reaped.
	Observe func(reaped int64)
}

// Work reaps one run's worth of keys and tombstones.
func (w *ReaperWorker) Work(ctx context.Context, _ *river.Job[ReaperArgs]) error {
	_, err := w.RunOnce(ctx)
	return err
}

// RunOnce reaps expired keys batch by batch, leaving a tombstone for each,
// then deletes expired tombstones, and returns how many keys it reaped.
func (w *ReaperWorker) RunOnce(ctx context.Context) (int64, error) {
	w.Config.setDefaults()
	q := dbsqlc.New()
	reaped, err := w.batches(func() (int64, error) {
		return q.IdempotencyKeyReap(ctx, w.Pool, &dbsqlc.IdempotencyKeyReapParams{
			RetentionSeconds: w.Config.Retention.Seconds(),
			MaxKeys:          int32(w.Config.BatchSize),
		})
	})
	if err != nil {
		return reaped, fmt.Errorf("error reaping keys: %w", err)
	}
	expired, err := w.batches(func() (int64, error) {
		return q.IdempotencyKeyTombstoneDeleteExpired(ctx, w.Pool, &dbsqlc.IdempotencyKeyTombstoneDeleteExpiredParams{
			RetentionSeconds: w.Config.TombstoneRetention.Seconds(),
			MaxKeys:          int32(w.Config.BatchSize),
		})
	})
	if err != nil {
		return reaped, fmt.Errorf("error deleting expired tombstones: %w", err)
	}
	if _, err := q.InstanceDeleteStale(ctx, w.Pool, w.Config.InstanceMaxAge.Seconds()); err != nil {
		return reaped, fmt.Errorf("error forgetting stale instances: %w", err)
	}
	if reaped > 0 || expired > 0 {
		w.Log.Info().Int64("reaped", reaped).Int64("tombstones_expired", expired).Msg("reaped finished idempotency keys")
	}
	if w.Observe != nil {
		w.Observe(reaped)
	}
	return reaped, nil
}

// batches runs one bounded statement until it affects less than a batch, or
// MaxBatches times, and returns the rows it affected in all.
func (w *ReaperWorker) batches(statement func() (int64, error)) (int64, error) {
	var total int64
	for range w.Config.MaxBatches {
		n, err := statement()
		if err != nil {
			return total, err
		}
		total += n
		if n < int64(w.Config.BatchSize) {
			break
		}
	}
	return total, nil
}
