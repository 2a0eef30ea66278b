package workers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// CompleterArgs is the periodic job that resumes abandoned keys.
type CompleterArgs struct{}

// Kind names the job in River.
func (CompleterArgs) Kind() string { return "completer" }

// CompleterConfig tunes the completer.
type CompleterConfig struct {
	// Interval is how often the job runs.
	Interval time.Duration
	// BatchSize bounds the keys one run resumes.
	BatchSize int
	// Concurrency bounds the keys resumed at once.
	Concurrency int
	// MinIdle leaves a key alone for this long after its last run, so a
	// client's own prompt retry usually gets there first.
	MinIdle time.Duration
	// Backoff is the wait after a key's first failed run; it doubles with
	// every run, up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// KeyTimeout bounds one resume.
	KeyTimeout time.Duration
}

func (c *CompleterConfig) setDefaults() {
	if c.Interval <= 0 {
		c.Interval = 10 * time.Second
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 100
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.MinIdle <= 0 {
		c.MinIdle = 2 * time.Second
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 5 * time.Minute
	}
	if c.KeyTimeout <= 0 {
		c.KeyTimeout = time.Minute
	}
}

// CompleterWorker drives unfinished keys that no live run holds through the
// same phase engine the API uses, so a payment whose client went away, or
// whose server died mid-phase, finishes without the client.
type CompleterWorker struct {
	river.WorkerDefaults[CompleterArgs]
	Pool   *pgxpool.Pool
	Engine *phases.Engine
	Config CompleterConfig
	Log    zerolog.Logger
	// Observe, when set, is told the outcome of every resume.
	Observe func(outcome string)
}

// Timeout lets a batch run longer than River's default job timeout.
func (w *CompleterWorker) Timeout(*river.Job[CompleterArgs]) time.Duration {
	return 2*w.Config.KeyTimeout + time.Minute
}

// Work resumes one batch of keys.
func (w *CompleterWorker) Work(ctx context.Context, _ *river.Job[CompleterArgs]) error {
	_, err := w.RunOnce(ctx)
	return err
}

// RunOnce resumes one batch and returns how many keys it tried.
func (w *CompleterWorker) RunOnce(ctx context.Context) (int, error) {
	w.Config.setDefaults()
	ids, err := dbsqlc.New().IdempotencyKeyListResumable(ctx, w.Pool, &dbsqlc.IdempotencyKeyListResumableParams{
		MinIdleSeconds:    w.Config.MinIdle.Seconds(),
		BackoffSeconds:    w.Config.Backoff.Seconds(),
		MaxBackoffSeconds: w.Config.MaxBackoff.Seconds(),
		LeaseSeconds:      w.Engine.LeaseTimeout().Seconds(),
		DeadAfterSeconds:  w.Engine.DeadAfter().Seconds(),
		MaxKeys:           int32(w.Config.BatchSize),
	})
	if err != nil {
		return 0, fmt.Errorf("error listing resumable keys: %w", err)
	}
	var (
		wg  sync.WaitGroup
		sem = make(chan struct{}, w.Config.Concurrency)
	)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			w.resume(ctx, id)
		}()
	}
	wg.Wait()
	return len(ids), nil
}

func (w *CompleterWorker) resume(ctx context.Context, id int64) {
	ctx, cancel := context.WithTimeout(ctx, w.Config.KeyTimeout)
	defer cancel()
	log := w.Log.With().Int64("idempotency_key_id", id).Logger()
	res, err := w.Engine.Resume(ctx, id)
	var (
		inProgress *phases.InProgressError
		ambiguous  *phases.AmbiguousError
		outcome    string
	)
	switch {
	case err == nil && res.Replayed:
		outcome = "already_finished"
	case err == nil:
		outcome = "finished"
		log.Info().Int("status", res.Response.Status).Msg("completer finished an abandoned key")
	case errors.As(err, &inProgress), errors.Is(err, phases.ErrLeaseLost):
		outcome = "in_progress"
	case errors.As(err, &ambiguous):
		outcome = "ambiguous"
		log.Warn().Err(err).Msg("completer: outcome still unknown; will retry with backoff")
	default:
		outcome = "error"
		log.Error().Err(err).Msg("completer: resume failed")
	}
	if w.Observe != nil {
		w.Observe(outcome)
	}
}
