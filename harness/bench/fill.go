package bench

// # Filling the database (issue 12)
//
// Fill makes a bench database look like one that has served for a while:
// millions of finished idempotency keys with everything the service leaves
// behind them, so that fresh payments and replays can be measured against
// full tables and full indexes rather than empty ones, and the reaper
// against a realistic work list.
//
// # What a fill holds
//
// For keys = K (10,000,000 in the issue), spread round robin over the
// given users:
//
//   - K finished keys: 20 payment keys for every refund key (so 1/21 of the
//     keys are refunds, and 5% of the payments are refunded). Of the
//     payments 8% are declined (stored 402 card-declined, with the decline
//     codes of Stripe's test cards), the rest succeeded (stored 201). Each
//     refund (stored 201, refund succeeded) gives back all of a payment or
//     half of it, and refunds a payment made an hour earlier (in the
//     first hour, one made seconds earlier). Every row is what the service
//     writes: the request as internal/idempotency canonicalises and
//     fingerprints it, so a filled key replays through the service like a
//     real one (fill_test.go sends them); the stored answer byte for byte
//     as payments.createdResponse and friends write it; intent ids as
//     internal/intent derives them from the deployment's namespace; the
//     payment's amount_refunded and amount_reserved after its refund; a
//     lease released; runs = 1.
//   - A payment per payment key, a refund per refund key, two audit
//     records per key (created and outcome, as PaymentInsert,
//     PaymentRecordOutcome, RefundInsert and RefundRecordOutcome write
//     them), a receipt per succeeded payment, and one Stripe event per key
//     as its webhook leaves it: payment_intent.succeeded or
//     .payment_failed, ignored because the charge path settled the payment
//     first ("payment N is succeeded already"), and refund.created,
//     applied (a no-op: the refund is settled already). A production
//     endpoint subscribes only to the events it handles, so the
//     payment_intent.created that the emulator also sends is left out.
//   - Time: the keys' created_at run evenly, in id order, over a span
//     that ends at the fill's start (its anchor) and is the key retention
//     (24 h) plus a backlog share (1%, about 14.5 minutes): so 99% of the
//     keys are the replayable last day, the steady state of a service
//     whose reaper keeps up, and 1% finished before the retention and are
//     the reaper's backlog, as if it had been stopped for a quarter of an
//     hour. Each key finishes 150–850 ms after it is created (Stripe's
//     answer); receipts and Stripe events follow within a second.
//   - Tombstones: by default as many as keys, one day's worth, at the old
//     end of the 90-day tombstone retention: 1% of them past it (the
//     reaper's tombstone backlog) and the rest expiring over the next day,
//     so the reaper deletes tombstones at the rate it makes them, as it
//     does in a steady state. A real steady state holds 90 days of
//     tombstones (90 times as many: 900 M at 10 M keys a day), which no
//     fill here could hold; the 88 days left out change nothing but the
//     size of the tombstone table and of its primary key, which every
//     fresh key probes and the reaper inserts into (see Sizes, and scale
//     by 90). Their keys, payments and refunds have ids of their own,
//     reserved below the filled ones, as history would have them.
//
// Not filled: the history that outlives keys. Payments, refunds, audit
// records, receipts and Stripe events are never deleted, so a database
// that has served for a year holds a year of them; the fill holds only the
// ones of its keys (about a day). Their indexes keyed by time or by
// sequence (ids, user and time) are as cheap to insert into at any size,
// but those keyed by random values (payments.stripe_payment_intent_id,
// stripe_events.id, refunds.stripe_refund_id) grow with
// all of history and touch a random page per insert. Not filled either:
// unfinished or parked keys (a steady state has a handful), disputes, River
// jobs (only the periodic completer and reaper jobs are left there in a
// steady state) and the receipt outbox (drained within a second).
//
// Filled keys are random UUIDv4s, as clients send them (from a hash of the
// key's id, so a second fill of the same database names other keys): they
// sort at random among their user's keys, as the benchmark's own fresh
// keys (RandomKey) do, so the unique index and the tombstones' primary key
// are the ones a service of random client keys has, and a new key lands on
// a random page of them. They are told apart by their ids (FillStats'
// FirstKeyID … LastKeyID), not by their names, and never collide with the
// benchmark's "replay-N" keys. Ids are reserved from the tables' sequences before
// anything is inserted, so the sequences are left past every filled id.
//
// # How
//
// Set-based and parallel: per chunk of ChunkKeys key positions (250,000),
// one transaction computes the chunk's rows once into a temporary table
// and inserts each table from it with INSERT … SELECT, two chunks at a
// time on two connections (Workers). Every value is a function of the
// key's position, so memory stays flat, chunks are independent, and each
// is logged as it commits. Foreign keys are not checked while filling
// (session_replication_role = replica) when the role may turn them off;
// the rows are consistent by construction and fill_test.go checks every
// foreign key. Indexes are built once the rows are in rather than row by
// row, with the density the service's own inserts would leave them (see
// randomIndexes), and the schema ends as the migrations made it. VACUUM
// ANALYZE comes before the builds (the bench cluster runs without
// autovacuum: without it the planner would know nothing of the rows and
// the first reads would set every hint bit), and a CHECKPOINT, where
// permitted, after them, so that the measured runs do not pay for the
// fill's writes.
//
// Measured on the 2-core bench machine (Postgres 15, 128 MB of shared
// buffers), 10,000,000 keys with 10,000,000 tombstones: 6 minutes (3.5
// inserting, 0.3 vacuuming, 2 building indexes), 23 GB of database, 26 GB
// of WAL written. Inserting the same rows through the service's indexes
// took about four times as long at 1,000,000 keys and slowed further as
// the indexes on random values outgrew the cache.
//
// # How the runner uses it
//
// After migrating the bench database and creating its users, with the
// service stopped or not yet started: while the fill's indexes are down,
// the service's own statements that rely on them (the reaper's and the
// receipt dispatcher's ON CONFLICT, the key reservation's uniqueness)
// would fail, or worse, store a duplicate key. Then start the service and
// measure:
//
//	stats, err := bench.Fill(ctx, benchURL, users, 10_000_000, os.Stderr)
//	sizes, err := bench.Sizes(ctx, benchURL)  // rows and bytes of every table and index, for the report
//	replays, err := bench.FilledRequests(ctx, benchURL, users, stats, 24*time.Hour, 100_000)
//	// … start the service; replay scenario over replays (each answers r.Status, replayed)
//	before, err := bench.ReadReaper(ctx, benchURL, 24*time.Hour, workers.TombstoneRetentionDefault)
//	// … the measured runs …
//	after, err := bench.ReadReaper(ctx, benchURL, 24*time.Hour, workers.TombstoneRetentionDefault)
//	w, err := bench.ReaperBetween(ctx, benchURL, before, after)
//	// w.CreatedPerSecond() against w.ReapedPerSecond(), w.BacklogBefore/After, w.KeepsUp(time.Minute)
//
// ReadReaper queries the bench database, so take its readings outside the
// Watcher's bracket of a fresh run, as the other readings of the bench
// database are. The backlog grows by a minute's worth of keys (K/1440)
// every minute after the fill until the service's reaper first runs (at
// its start, then every PAYMENTSD_REAPER_INTERVAL), and one run reaps at
// most BatchSize × MaxBatches = 100,000 keys: the runner reports the
// backlogs it read, not the fill's. At 10 M keys a run over the 100,000
// key backlog (and as many expired tombstones) took 11 s on an idle
// machine, 9,000 keys a second.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// FillOptions shape a fill; the zero value of each field is its default.
type FillOptions struct {
	// Keys is the number of finished keys, refund keys included.
	Keys int
	// Retention is the service's key retention (PAYMENTSD_KEY_RETENTION):
	// the span of replayable keys. Defaults to 24 hours.
	Retention time.Duration
	// Backlog is the share of keys that finished more than Retention
	// before the fill: the reaper's work waiting. Defaults to 0.01; a
	// negative value means none.
	Backlog float64
	// Tombstones is the number of tombstones, the same share of them past
	// TombstoneRetention. Defaults to Keys (a day's worth); negative means
	// none.
	Tombstones int
	// TombstoneRetention is the reaper's (ReaperConfig.TombstoneRetention).
	// Defaults to 90 days.
	TombstoneRetention time.Duration
	// ChunkKeys is how many keys one transaction fills. Defaults to
	// 250,000.
	ChunkKeys int
	// Workers is how many connections fill at once. Defaults to 2.
	Workers int
	// At is the fill's anchor, the end of its span. Defaults to the
	// database's clock when the fill starts.
	At time.Time
}

func (o *FillOptions) setDefaults() {
	if o.Retention <= 0 {
		o.Retention = 24 * time.Hour
	}
	switch {
	case o.Backlog == 0:
		o.Backlog = 0.01
	case o.Backlog < 0:
		o.Backlog = 0
	}
	switch {
	case o.Tombstones == 0:
		o.Tombstones = o.Keys
	case o.Tombstones < 0:
		o.Tombstones = 0
	}
	if o.TombstoneRetention <= 0 {
		o.TombstoneRetention = 90 * 24 * time.Hour
	}
	if o.ChunkKeys <= 0 {
		o.ChunkKeys = 250_000
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
}

// FillStats is what a fill inserted, and how long it took.
type FillStats struct {
	// At is the anchor: the newest filled key was created just before it.
	At time.Time
	// Keys counts the finished keys, PaymentKeys and RefundKeys their two
	// flows; Declined the payments stored 402.
	Keys, PaymentKeys, RefundKeys, Declined int64
	// Rows of the other tables.
	Payments, Refunds, AuditRecords, Receipts, StripeEvents, Tombstones int64
	// Backlog is the keys that had finished more than the retention
	// before At; TombstoneBacklog the tombstones past theirs.
	Backlog, TombstoneBacklog int64
	// FirstKeyID and LastKeyID bound the filled keys' ids (and likewise
	// payments), for a runner that wants to pick filled keys.
	FirstKeyID, LastKeyID         int64
	FirstPaymentID, LastPaymentID int64
	// Insert is the time spent inserting, Vacuum in VACUUM ANALYZE, Index
	// building the indexes and the CHECKPOINT after, Took the whole fill.
	Insert, Index, Vacuum, Took time.Duration
	// TableTime is the insert time per table, the chunks' source rows
	// included as "source".
	TableTime map[string]time.Duration
}

// Fill inserts keys finished idempotency keys spread over users, with the
// payments, refunds, audit records, receipts, Stripe events and tombstones
// of a service in a steady state, into the migrated database at dbURL, and
// logs its progress to log. See the comment at the top of this file for
// the shape; FillWith takes the options.
func Fill(ctx context.Context, dbURL string, users []User, keys int, log io.Writer) (FillStats, error) {
	return FillWith(ctx, dbURL, users, FillOptions{Keys: keys}, log)
}

// fillTables are the tables a fill inserts into, biggest first.
var fillTables = []string{
	"audit_records", "idempotency_keys", "payments", "idempotency_key_tombstones", "stripe_events", "receipts", "refunds",
}

// FillWith is Fill with options.
func FillWith(ctx context.Context, dbURL string, users []User, opts FillOptions, log io.Writer) (FillStats, error) {
	start := time.Now()
	stats := FillStats{TableTime: map[string]time.Duration{}}
	if opts.Keys < 1 {
		return stats, errors.New("fill: keys must be at least 1")
	}
	if len(users) == 0 {
		return stats, errors.New("fill: no users")
	}
	if log == nil {
		log = io.Discard
	}
	opts.setDefaults()

	conns := make([]*pgx.Conn, opts.Workers)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	for i := range conns {
		c, err := fillConn(ctx, dbURL, log, i == 0)
		if err != nil {
			return stats, err
		}
		conns[i] = c
	}
	conn := conns[0]

	var namespace uuid.UUID
	var at time.Time
	if err := conn.QueryRow(ctx, "SELECT namespace, now() FROM deployment").Scan(&namespace, &at); err != nil {
		return stats, fmt.Errorf("fill: error reading the deployment's namespace (is the database migrated?): %w", err)
	}
	if !opts.At.IsZero() {
		at = opts.At
	}
	stats.At = at

	p, err := reserveIDs(ctx, conn, users, opts, at, namespace)
	if err != nil {
		return stats, err
	}
	stats.FirstKeyID, stats.LastKeyID = p.keyBase, p.keyBase+p.keys-1
	stats.FirstPaymentID, stats.LastPaymentID = p.paymentBase, p.paymentBase+p.payments-1
	for _, c := range conns {
		if _, err := c.Exec(ctx, p.expand(fillFunctions)); err != nil {
			return stats, fmt.Errorf("fill: error creating the fill's functions: %w", err)
		}
	}

	// Indexes are built once the rows are in: see dropIndexes.
	rebuild, err := dropIndexes(ctx, conn, log)
	// Whatever happens next, the indexes dropped are built again.
	defer restoreIndexes(context.WithoutCancel(ctx), dbURL, rebuild, log)
	if err != nil {
		return stats, err
	}

	fmt.Fprintf(log, "fill: %d keys (%d payments, %d refunds) over %d users and %d tombstones, anchored at %s, %d at a time on %d connections\n",
		p.keys, p.payments, p.refunds, len(users), p.tombstones, at.UTC().Format(time.RFC3339), opts.ChunkKeys, len(conns))

	// The jobs: chunks of keys, then chunks of tombstones.
	var jobs []fillJob
	for lo := int64(0); lo < p.keys; lo += int64(opts.ChunkKeys) {
		jobs = append(jobs, fillJob{what: "keys", lo: lo, hi: min(lo+int64(opts.ChunkKeys), p.keys), total: p.keys})
	}
	for lo := int64(0); lo < p.tombstones; lo += int64(opts.ChunkKeys) {
		jobs = append(jobs, fillJob{what: "tombstones", lo: lo, hi: min(lo+int64(opts.ChunkKeys), p.tombstones), total: p.tombstones})
	}
	insertStart := time.Now()
	progress := &fillProgress{log: log, start: insertStart, done: map[string]int64{}, took: stats.TableTime}
	err = runParallel(ctx, conns, jobs, func(ctx context.Context, c *pgx.Conn, j fillJob) error {
		took, err := p.fill(ctx, c, j)
		progress.add(j, took)
		return err
	})
	if err != nil {
		return stats, err
	}
	stats.Insert = time.Since(insertStart)

	// VACUUM ANALYZE, the biggest tables first, as many at once as there
	// are connections, before the indexes are built (it need not read
	// them).
	vacuumStart := time.Now()
	var vacuums []fillJob
	for _, t := range fillTables {
		vacuums = append(vacuums, fillJob{what: t})
	}
	err = runParallel(ctx, conns, vacuums, func(ctx context.Context, c *pgx.Conn, j fillJob) error {
		t0 := time.Now()
		if _, err := c.Exec(ctx, "VACUUM ANALYZE "+j.what); err != nil {
			return fmt.Errorf("fill: error vacuuming %s: %w", j.what, err)
		}
		progress.logf("fill: VACUUM ANALYZE %s: %s\n", j.what, time.Since(t0).Round(time.Millisecond))
		return nil
	})
	if err != nil {
		return stats, err
	}
	stats.Vacuum = time.Since(vacuumStart)

	indexStart := time.Now()
	err = runParallel(ctx, conns, rebuild, func(ctx context.Context, c *pgx.Conn, j fillJob) error {
		t0 := time.Now()
		if err := j.index.create(ctx, c); err != nil {
			return err
		}
		progress.logf("fill: built %s: %s\n", j.index.name, time.Since(t0).Round(time.Millisecond))
		return nil
	})
	if err != nil {
		return stats, err
	}

	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		fmt.Fprintf(log, "fill: no CHECKPOINT (%v); the first measured run may pay for the fill's writes\n", err)
	}
	stats.Index = time.Since(indexStart)

	if err := p.count(ctx, conn, &stats); err != nil {
		return stats, err
	}
	stats.Took = time.Since(start)
	fmt.Fprintf(log, "fill: done in %s (inserting %s, vacuuming %s, indexing %s): %d keys, %d payments, %d refunds, %d audit records, %d receipts, %d Stripe events, %d tombstones; backlog %d keys, %d tombstones\n",
		stats.Took.Round(time.Second), stats.Insert.Round(time.Second), stats.Vacuum.Round(time.Second), stats.Index.Round(time.Second),
		stats.Keys, stats.Payments, stats.Refunds, stats.AuditRecords, stats.Receipts, stats.StripeEvents, stats.Tombstones,
		stats.Backlog, stats.TombstoneBacklog)
	return stats, nil
}
