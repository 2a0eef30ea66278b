package workers

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"
	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// Config assembles the workers.
type Config struct {
	Completer CompleterConfig
	Reaper    ReaperConfig
	// Receipts tunes the receipt dispatcher; Deliverer sends receipts (the
	// default logs them).
	Receipts  DispatcherConfig
	Deliverer Deliverer
	Log       zerolog.Logger
	// RiverLog receives River's own logs.
	RiverLog *slog.Logger
	// Observe receives the workers' outcomes, for metrics.
	ObserveResume   func(outcome string)
	ObserveReaped   func(reaped int64)
	ObserveReceipts func(delivered, failed int)
	// PollOnly makes River poll for new jobs and for its leader instead of
	// waiting on LISTEN, which needs a session of its own. NewClient polls
	// regardless when the pool is transaction-pooled (db.TransactionPooled).
	PollOnly bool
}

// PollOnly reports whether NewClient's River client polls rather than
// listens, for cfg over pool: when asked to, or when the pool's URL says
// it is behind a transaction-pooling pooler, where a LISTEN's session is
// not the client's own. Polling costs latency only: a new job waits up to
// River's FetchPollInterval (a second) to be fetched, a new leader up to
// its election interval; the periodic jobs and receipts keep their pace.
func PollOnly(pool *db.Pool, cfg Config) bool {
	return cfg.PollOnly || db.TransactionPooled(pool.Driver().Config().ConnConfig)
}

// NewClient returns a River client that runs the completer and reaper
// workers, with the completer and reaper scheduled as periodic jobs
// by River's elected leader.
func NewClient(pool *db.Pool, engine *phases.Engine, cfg Config) (*river.Client[pgx.Tx], error) {
	cfg.Completer.setDefaults()
	cfg.Reaper.setDefaults()
	completer := &CompleterWorker{Pool: pool, Engine: engine, Config: cfg.Completer, Log: cfg.Log, Observe: cfg.ObserveResume}
	reaper := &ReaperWorker{Pool: pool, Config: cfg.Reaper, Log: cfg.Log, Observe: cfg.ObserveReaped}

	workers := river.NewWorkers()
	river.AddWorker(workers, completer)
	river.AddWorker(workers, reaper)
	river.AddWorker(workers, &LegacyReceiptWorker{Pool: pool})

	client, err := river.NewClient(riverpgxv5.New(pool.Driver()), &river.Config{
		PollOnly: PollOnly(pool, cfg),
		// A process killed mid-job leaves its jobs 'running'. River rescues
		// them only after RescueStuckJobsAfter (an hour by default), which
		// would hold the next periodic run back that long: rescue after 20s
		// instead. River rescues a job no earlier than its kind's own
		// timeout, and a job ends before its timeout: the completer bounds
		// its runs below its Timeout (CompleterWorker.RunTimeout), the
		// reaper takes JobTimeout.
		JobTimeout:           JobTimeout,
		RescueStuckJobsAfter: RescueStuckJobsAfter,
		Logger:               cfg.RiverLog,
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 8}},
		Workers:              workers,
		PeriodicJobs: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(cfg.Completer.Interval),
				func() (river.JobArgs, *river.InsertOpts) { return CompleterArgs{}, PeriodicInsertOpts() },
				&river.PeriodicJobOpts{ID: "completer", RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(cfg.Reaper.Interval),
				func() (river.JobArgs, *river.InsertOpts) { return ReaperArgs{}, PeriodicInsertOpts() },
				&river.PeriodicJobOpts{ID: "reaper", RunOnStart: true}),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("error creating River client: %w", err)
	}
	return client, nil
}

// River's timing of jobs: a job other than the completer is cancelled after
// JobTimeout, and a job left 'running' by a dead process is rescued
// after RescueStuckJobsAfter, or after its kind's timeout if that is longer.
const (
	JobTimeout           = 15 * time.Second
	RescueStuckJobsAfter = 20 * time.Second
)

// PeriodicInsertOpts are the insert options of the periodic jobs: no new job
// is inserted while one of its kind is waiting or running (River skips the
// insert on the unique conflict), so runs cannot pile up behind a slow one;
// and a failed run is not retried, since the next period runs it anyway.
// Completed and discarded jobs do not count, or none could follow them.
func PeriodicInsertOpts() *river.InsertOpts {
	return &river.InsertOpts{
		MaxAttempts: 1,
		UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateRunning, rivertype.JobStateScheduled,
		}},
	}
}

// NewDispatcher returns the receipt dispatcher of cfg; run it beside the
// River client.
func NewDispatcher(pool *db.Pool, cfg Config) *Dispatcher {
	if cfg.Deliverer == nil {
		cfg.Deliverer = LogDeliverer{Log: cfg.Log}
	}
	return &Dispatcher{Pool: pool, Deliverer: cfg.Deliverer, Config: cfg.Receipts, Log: cfg.Log, Observe: cfg.ObserveReceipts}
}
