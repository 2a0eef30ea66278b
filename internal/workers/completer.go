package workers

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// CompleterArgs is the periodic job that resumes abandoned keys.
type CompleterArgs struct{}

// Kind names the job in River.
func (CompleterArgs) Kind() string { return "completer" }

// The outcomes of one resume, as CompleterWorker.Observe is told them.
const (
	ResumeFinished        = "finished"
	ResumeAlreadyFinished = "already_finished"
	ResumeInProgress      = "in_progress"
	ResumeAmbiguous       = "ambiguous"
	ResumeNeedsAttention  = "needs_attention"
	ResumeError           = "error"
	// ResumePanic is a resume that panicked: recovered and logged, the key
	// left to its lease and to a later run.
	ResumePanic = "panic"
)

// CompleterConfig tunes the completer.
type CompleterConfig struct {
	// Interval is how often the job runs. Defaults to 10 seconds.
	Interval time.Duration
	// BatchSize bounds the keys one run resumes. Defaults to 100.
	BatchSize int
	// Concurrency bounds the keys resumed at once. Defaults to 4.
	Concurrency int
	// MinIdle leaves a key alone for this long after its last run, so a
	// client's own prompt retry usually gets there first. Defaults to 2
	// seconds.
	MinIdle time.Duration
	// Backoff is the wait after a key's first failed run; it doubles with
	// every run, up to MaxBackoff. Defaults to a second and 5 minutes.
	Backoff, MaxBackoff time.Duration
	// KeyTimeout bounds one resume, and can only shorten the bound the lease
	// sets (CompleterWorker.KeyTimeout). Defaults to that bound.
	KeyTimeout time.Duration
	// RunTimeout bounds one run: a key is started only while it can end
	// within it, the rest waits for the next run. Defaults to two key
	// timeouts, and is never shorter than one plus the lease margin.
	RunTimeout time.Duration
	// RunLease is how long a run's worker lease lasts unless renewed (a
	// third of it apart): how long a run that died holds the next one
	// back. Defaults to DefaultRunLease.
	RunLease time.Duration
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
	if c.RunLease <= 0 {
		c.RunLease = DefaultRunLease
	}
}

// CompleterWorker drives unfinished keys that no live run holds through the
// same phase engine the API uses, so a payment whose client went away, or
// whose server died mid-phase, finishes without the client.
//
// One run at a time across every process: a run holds a worker lease (a
// row of worker_leases, see runLeased), and another run waits for it.
// River inserts no periodic job while one waits or runs
// (PeriodicInsertOpts), so runs do not pile up either. The keys' own leases
// keep each key safe regardless; the run's lease keeps runs from working
// the same keys at once.
type CompleterWorker struct {
	river.WorkerDefaults[CompleterArgs]
	Pool   *db.Pool
	Engine *phases.Engine
	Config CompleterConfig
	// Log is where runs log; it travels in the context, so the engine's
	// own lines carry the run's fields too.
	Log zerolog.Logger
	// Observe, when set, is told the outcome of every resume (Resume*).
	Observe func(outcome string)

	// resumeKey resumes one key: Engine.Resume, or a test's stand-in.
	resumeKey func(ctx context.Context, keyID int64) (*phases.Result, error)
}

// leaseMargin is the part of a lease a resume leaves unused: time for its
// last commit, and for the database's clock, which times leases out, to
// disagree with this process's.
func leaseMargin(lease time.Duration) time.Duration { return lease / 10 }

// KeyTimeout bounds one resume: it ends before its lease could be taken
// over, so a resume never runs beside the run that takes its key over.
func (w *CompleterWorker) KeyTimeout() time.Duration {
	lease := w.Engine.LeaseTimeout()
	bound := lease - leaseMargin(lease)
	if w.Config.KeyTimeout > 0 {
		return min(w.Config.KeyTimeout, bound)
	}
	return bound
}

// RunTimeout bounds one run; keys start only while they can end within it.
// It leaves room for at least one key, and the lease margin for listing the
// keys first.
func (w *CompleterWorker) RunTimeout() time.Duration {
	least := w.KeyTimeout() + leaseMargin(w.Engine.LeaseTimeout())
	if w.Config.RunTimeout > 0 {
		return max(w.Config.RunTimeout, least)
	}
	return max(2*w.KeyTimeout(), least)
}

// jobTimeoutGrace is how much longer River lets a run's job live than the
// run bounds itself: River cancels the job only after the run has ended on
// its own, and rescues it (a second, overlapping run) no earlier than that.
const jobTimeoutGrace = 30 * time.Second

// Timeout is the job's timeout in River: the run's own bound plus a grace.
// River rescues a running job no earlier than its kind's timeout, so the
// run has ended before its job could be rescued and run twice.
func (w *CompleterWorker) Timeout(*river.Job[CompleterArgs]) time.Duration {
	return w.RunTimeout() + jobTimeoutGrace
}

// Work resumes one batch of keys, within RunTimeout.
func (w *CompleterWorker) Work(ctx context.Context, _ *river.Job[CompleterArgs]) error {
	ctx, cancel := context.WithTimeout(ctx, w.RunTimeout())
	defer cancel()
	_, err := w.RunOnce(ctx)
	return err
}

// RunOnce resumes one batch and returns how many keys it tried. It first
// waits, as long as ctx lets it, for any other run, in this process or
// another, to end.
func (w *CompleterWorker) RunOnce(ctx context.Context) (int, error) {
	w.Config.setDefaults()
	ctx = w.Log.With().Str("job", CompleterArgs{}.Kind()).Logger().WithContext(ctx)
	var tried int
	err := runLeased(ctx, w.Pool, completerLease, w.Config.RunLease, func(ctx context.Context) error {
		var err error
		tried, err = w.runBatch(ctx)
		return err
	})
	return tried, err
}

// runBatch lists resumable keys and resumes them, Concurrency at a time,
// starting each only while it can end before the run's deadline.
func (w *CompleterWorker) runBatch(ctx context.Context) (int, error) {
	ids, err := dbsqlc.New().IdempotencyKeyListResumable(ctx, w.Pool, &dbsqlc.IdempotencyKeyListResumableParams{
		MinIdleSeconds:    w.Config.MinIdle.Seconds(),
		BackoffSeconds:    w.Config.Backoff.Seconds(),
		MaxBackoffSeconds: w.Config.MaxBackoff.Seconds(),
		LeaseSeconds:      w.Engine.LeaseTimeout().Seconds(),
		DeadAfterSeconds:  w.Engine.DeadAfter().Seconds(),
		Now:               w.Engine.StaleAt(),
		MaxKeys:           int32(w.Config.BatchSize),
	})
	if err != nil {
		return 0, fmt.Errorf("error listing resumable keys: %w", err)
	}
	keyTimeout := w.KeyTimeout()
	var (
		wg    sync.WaitGroup
		sem   = make(chan struct{}, w.Config.Concurrency)
		tried int
	)
	for _, id := range ids {
		sem <- struct{}{}
		if deadline, ok := ctx.Deadline(); ctx.Err() != nil || ok && time.Until(deadline) < keyTimeout {
			<-sem
			break // the rest waits for the next run
		}
		tried++
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			w.resume(ctx, id, keyTimeout)
		}()
	}
	wg.Wait()
	return tried, nil
}

// resume drives one key and reports its outcome. A panic is recovered here,
// in the goroutine that runs the key, and is the outcome "panic": the key
// keeps its lease until it goes stale, and a later run tries it again.
func (w *CompleterWorker) resume(ctx context.Context, id int64, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	log := zerolog.Ctx(ctx).With().Int64("idempotency_key_id", id).Logger()
	ctx = log.WithContext(ctx)
	outcome := ResumePanic
	defer func() {
		if r := recover(); r != nil {
			log.Error().Str("panic", fmt.Sprint(r)).Bytes("stack", debug.Stack()).Msg("completer: resume panicked")
		}
		if w.Observe != nil {
			w.Observe(outcome)
		}
	}()
	resumeKey := w.resumeKey
	if resumeKey == nil {
		resumeKey = w.Engine.Resume
	}
	res, err := resumeKey(ctx, id)
	outcome = classifyResume(ctx, res, err)
}

// classifyResume names the outcome of a resume and logs what an operator
// should see.
func classifyResume(ctx context.Context, res *phases.Result, err error) string {
	log := zerolog.Ctx(ctx)
	var (
		inProgress *phases.InProgressError
		ambiguous  *phases.AmbiguousError
		attention  *phases.NeedsAttentionError
	)
	switch {
	case err == nil && res.Replayed:
		return ResumeAlreadyFinished
	case err == nil:
		log.Info().Int("status", res.Response.Status).Msg("completer finished an abandoned key")
		return ResumeFinished
	case errors.As(err, &inProgress), errors.Is(err, phases.ErrLeaseLost):
		return ResumeInProgress
	case errors.As(err, &ambiguous):
		log.Warn().Err(err).Msg("completer: outcome still unknown; will retry with backoff")
		return ResumeAmbiguous
	case errors.As(err, &attention):
		// The engine logged the parking itself.
		return ResumeNeedsAttention
	}
	log.Error().Err(err).Msg("completer: resume failed")
	return ResumeError
}
