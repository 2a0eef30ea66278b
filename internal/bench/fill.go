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
// but those keyed by random values (payments.intent_id and
// stripe_payment_intent_id, stripe_events.id, refunds' likewise) grow with
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
	"slices"
	"strconv"
	"strings"
	"sync"
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

// fillConn opens one of the fill's connections. Its session commits
// asynchronously (a fill is redone if the server crashes), keeps a chunk's
// source rows in memory, and fires no foreign key triggers when the role
// may turn them off.
func fillConn(ctx context.Context, dbURL string, log io.Writer, first bool) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("fill: error connecting to %s: %w", redact(dbURL), err)
	}
	for _, set := range []string{"SET synchronous_commit = off", "SET temp_buffers = '512MB'", "SET work_mem = '64MB'",
		"SET maintenance_work_mem = '1GB'", "SET jit = off"} {
		if _, err := conn.Exec(ctx, set); err != nil {
			_ = conn.Close(ctx)
			return nil, fmt.Errorf("fill: %s: %w", set, err)
		}
	}
	if _, err := conn.Exec(ctx, "SET session_replication_role = replica"); err != nil && first {
		fmt.Fprintf(log, "fill: foreign keys stay checked (slower): %v\n", err)
	}
	return conn, nil
}

// fillJob is a chunk of keys or tombstones, a table to vacuum or an index
// to build.
type fillJob struct {
	what          string
	lo, hi, total int64
	index         *savedIndex
}

// fill inserts one chunk, in one transaction, and returns the time spent
// per table.
func (p *fillParams) fill(ctx context.Context, conn *pgx.Conn, j fillJob) (map[string]time.Duration, error) {
	took := map[string]time.Duration{}
	if j.what == "tombstones" {
		t0 := time.Now()
		if _, err := conn.Exec(ctx, p.chunk(fillTombstones, j.lo, j.hi)); err != nil {
			return took, fmt.Errorf("fill: error filling tombstones %d–%d: %w", j.lo, j.hi-1, err)
		}
		took["idempotency_key_tombstones"] = time.Since(t0)
		return took, nil
	}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, step := range fillChunk {
			t0 := time.Now()
			if _, err := tx.Exec(ctx, p.chunk(step.sql, j.lo, j.hi)); err != nil {
				return fmt.Errorf("fill: error filling %s for keys %d–%d: %w", step.table, j.lo, j.hi-1, err)
			}
			took[step.table] += time.Since(t0)
		}
		return nil
	})
	return took, err
}

// runParallel runs the jobs in order, each on the first connection free,
// and stops at the first error.
func runParallel(ctx context.Context, conns []*pgx.Conn, jobs []fillJob, run func(context.Context, *pgx.Conn, fillJob) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queue := make(chan fillJob, len(jobs))
	for _, j := range jobs {
		queue <- j
	}
	close(queue)
	errs := make(chan error, len(conns))
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			for j := range queue {
				if ctx.Err() != nil {
					return
				}
				if err := run(ctx, c, j); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// fillProgress logs chunks as they finish.
type fillProgress struct {
	mu    sync.Mutex
	log   io.Writer
	start time.Time
	done  map[string]int64
	took  map[string]time.Duration
}

func (f *fillProgress) add(j fillJob, took map[string]time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t, d := range took {
		f.took[t] += d
	}
	f.done[j.what] += j.hi - j.lo
	done, elapsed := f.done[j.what], time.Since(f.start)
	fmt.Fprintf(f.log, "fill: %d/%d %s (%.0f%%), %s since the start\n", done, j.total, j.what,
		100*float64(done)/float64(j.total), elapsed.Round(time.Second))
}

func (f *fillProgress) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.log, format, args...)
}

// fillParams are the numbers a fill's SQL is written with.
type fillParams struct {
	keys, payments, refunds   int64
	tombstones                int64
	lag                       int64 // refund lag, in blocks of 21 keys
	keyBase, paymentBase      int64
	refundBase, auditBase     int64
	receiptBase               int64
	tombKeyBase, tombPayBase  int64
	tombRefundBase            int64
	anchor, span              float64 // seconds
	tombSpan, tombBacklogSpan float64
	retention, tombRetention  float64
	users                     []User
	namespace                 uuid.UUID
}

// reserveIDs works out how many rows each table gets and moves each
// sequence past them, tombstones' ids first (they are older).
func reserveIDs(ctx context.Context, conn *pgx.Conn, users []User, opts FillOptions, at time.Time, namespace uuid.UUID) (*fillParams, error) {
	k := int64(opts.Keys)
	p := &fillParams{
		keys: k, refunds: k / 21, tombstones: int64(opts.Tombstones),
		users: users, namespace: namespace,
		anchor:        float64(at.UnixMicro()) / 1e6,
		span:          opts.Retention.Seconds() / (1 - opts.Backlog),
		retention:     opts.Retention.Seconds(),
		tombRetention: opts.TombstoneRetention.Seconds(),
	}
	p.payments = k - p.refunds
	// As many blocks as an hour holds: a refund comes an hour after its
	// payment.
	p.lag = max(1, int64(3600/p.span*float64(k)/21+0.5))
	// Tombstones as dense in time as the keys.
	p.tombSpan = p.span * float64(p.tombstones) / float64(k)
	p.tombBacklogSpan = p.tombSpan * opts.Backlog
	tombBlocks := (p.tombstones + 20) / 21
	tombPayments, tombRefunds := 20*tombBlocks, tombBlocks
	declined := 2*(p.payments/25) + min(p.payments%25, 2)

	var err error
	reserve := func(seq string, n int64) int64 {
		if err != nil || n == 0 {
			return 0
		}
		var base int64
		err = conn.QueryRow(ctx, `SELECT base FROM (SELECT nextval($1::regclass) AS base) AS b, LATERAL setval($1::regclass, base + $2 - 1)`,
			seq, n).Scan(&base)
		if err != nil {
			err = fmt.Errorf("fill: error reserving %d ids of %s: %w", n, seq, err)
		}
		return base
	}
	tombKeys := reserve("idempotency_keys_id_seq", p.tombstones+k)
	p.tombKeyBase, p.keyBase = tombKeys, tombKeys+p.tombstones
	pays := reserve("payments_id_seq", tombPayments+p.payments)
	p.tombPayBase, p.paymentBase = pays, pays+tombPayments
	refs := reserve("refunds_id_seq", tombRefunds+p.refunds)
	p.tombRefundBase, p.refundBase = refs, refs+tombRefunds
	p.auditBase = reserve("audit_records_id_seq", 2*k)
	p.receiptBase = reserve("receipts_id_seq", p.payments-declined)
	return p, err
}

// expand writes p's numbers into sql.
func (p *fillParams) expand(sql string) string {
	ids := make([]string, len(p.users))
	for i, u := range p.users {
		ids[i] = strconv.FormatInt(u.ID, 10)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
	d := func(v int64) string { return strconv.FormatInt(v, 10) }
	return strings.NewReplacer(
		"{{KEYS}}", d(p.keys), "{{LAG}}", d(p.lag), "{{TOMBSTONES}}", d(max(p.tombstones, 1)),
		"{{KEY_BASE}}", d(p.keyBase), "{{PAYMENT_BASE}}", d(p.paymentBase), "{{REFUND_BASE}}", d(p.refundBase),
		"{{AUDIT_BASE}}", d(p.auditBase), "{{RECEIPT_BASE}}", d(p.receiptBase),
		"{{TOMB_KEY_BASE}}", d(p.tombKeyBase), "{{TOMB_PAYMENT_BASE}}", d(p.tombPayBase), "{{TOMB_REFUND_BASE}}", d(p.tombRefundBase),
		"{{ANCHOR}}", f(p.anchor), "{{SPAN}}", f(p.span), "{{RETENTION}}", f(p.retention),
		"{{TOMB_SPAN}}", f(p.tombSpan), "{{TOMB_BACKLOG_SPAN}}", f(p.tombBacklogSpan), "{{TOMB_RETENTION}}", f(p.tombRetention),
		"{{USERS}}", "{"+strings.Join(ids, ",")+"}", "{{NUSERS}}", d(int64(len(p.users))),
		"{{NAMESPACE}}", p.namespace.String(),
	).Replace(sql)
}

// chunk is sql for positions lo … hi-1.
func (p *fillParams) chunk(sql string, lo, hi int64) string {
	return p.expand(strings.NewReplacer("{{LO}}", strconv.FormatInt(lo, 10), "{{HI}}", strconv.FormatInt(hi, 10)).Replace(sql))
}

// count reads back what the fill made: exact counts over the filled id
// ranges, so rows that were there before are not counted.
func (p *fillParams) count(ctx context.Context, conn *pgx.Conn, s *FillStats) error {
	err := conn.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE flow = 'payment'), count(*) FILTER (WHERE flow = 'refund'),
		       count(*) FILTER (WHERE response_code = 402),
		       count(*) FILTER (WHERE finished_at < $3::timestamptz - make_interval(secs => $4))
		FROM idempotency_keys WHERE id BETWEEN $1 AND $2`,
		p.keyBase, p.keyBase+p.keys-1, s.At, p.retention).Scan(&s.Keys, &s.PaymentKeys, &s.RefundKeys, &s.Declined, &s.Backlog)
	if err != nil {
		return fmt.Errorf("fill: error counting keys: %w", err)
	}
	queries := []struct {
		dst  *int64
		sql  string
		args []any
	}{
		{&s.Payments, "SELECT count(*) FROM payments WHERE id BETWEEN $1 AND $2", []any{p.paymentBase, p.paymentBase + p.payments - 1}},
		{&s.Refunds, "SELECT count(*) FROM refunds WHERE id BETWEEN $1 AND $2", []any{p.refundBase, p.refundBase + p.refunds - 1}},
		{&s.AuditRecords, "SELECT count(*) FROM audit_records WHERE id BETWEEN $1 AND $2", []any{p.auditBase, p.auditBase + 2*p.keys - 1}},
		{&s.Receipts, "SELECT count(*) FROM receipts WHERE payment_id BETWEEN $1 AND $2", []any{p.paymentBase, p.paymentBase + p.payments - 1}},
		{&s.StripeEvents, "SELECT count(*) FROM stripe_events e JOIN payments p ON p.stripe_payment_intent_id = e.object_id WHERE p.id BETWEEN $1 AND $2", []any{p.paymentBase, p.paymentBase + p.payments - 1}},
		{&s.Tombstones, "SELECT count(*) FROM idempotency_key_tombstones WHERE resource_type = 'payment' AND resource_id BETWEEN $1 AND $2 OR resource_type = 'refund' AND resource_id BETWEEN $3 AND $4",
			[]any{p.tombPayBase, p.paymentBase - 1, p.tombRefundBase, p.refundBase - 1}},
		{&s.TombstoneBacklog, "SELECT count(*) FROM idempotency_key_tombstones WHERE reaped_at < $1::timestamptz - make_interval(secs => $2) AND (resource_type = 'payment' AND resource_id BETWEEN $3 AND $4 OR resource_type = 'refund' AND resource_id BETWEEN $5 AND $6)",
			[]any{s.At, p.tombRetention, p.tombPayBase, p.paymentBase - 1, p.tombRefundBase, p.refundBase - 1}},
	}
	for _, q := range queries {
		if err := conn.QueryRow(ctx, q.sql, q.args...).Scan(q.dst); err != nil {
			return fmt.Errorf("fill: error counting: %w", err)
		}
	}
	// Stripe events of refunds are found through the refunds.
	var refundEvents int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM stripe_events e JOIN refunds r ON r.stripe_refund_id = e.object_id WHERE r.id BETWEEN $1 AND $2",
		p.refundBase, p.refundBase+p.refunds-1).Scan(&refundEvents); err != nil {
		return fmt.Errorf("fill: error counting: %w", err)
	}
	s.StripeEvents += refundEvents
	return nil
}

// Indexes are built once the rows are in, not row by row: Fill drops
// (dropIndexes) every index of the tables it fills, and the constraint an
// index backs, but the primary keys that foreign keys point at; inserts;
// and builds them again from their own definitions. Inserting into an index row by row costs
// several times what sorting the rows once does, and an index on random
// values (client keys, which look like UUIDs; intent ids; Stripe ids)
// costs a random page per insert once it outgrows the cache: row by row,
// a fill of 1 M keys took 116 s against 26 s, and the gap widens with size.
//
// A build is no denser than the service would leave the index: an index
// whose inserts come in key order (ids, times, per user) fills its pages to
// the B-tree's fillfactor either way, and one on random values is built at
// the density random inserts leave (leaves about 70% full: a full page
// splits in halves, which fill again before they split), WITH (fillfactor
// = 70), then reset, so that the definition ends as the migration made it.
// (Measured: 1 M random keys inserted one by one make an 84 MB index; built
// at 70, 84 MB; at the default 90, 65 MB.)
//
// randomIndexes are the indexes on random values, built at
// randomIndexFillFactor.
var randomIndexes = []string{
	"idempotency_keys_user_id_idempotency_key_key",
	"payments_stripe_payment_intent_id_key",
	"payments_intent_id_idx",
	"refunds_stripe_refund_id_key",
	"refunds_intent_id_idx",
	"stripe_events_pkey",
	"idempotency_key_tombstones_pkey",
}

// randomIndexFillFactor is the leaf density a B-tree grown by random
// inserts settles at.
const randomIndexFillFactor = 70

// savedIndex is an index dropped for the fill: its definition, and the
// constraint it backed, if any.
type savedIndex struct {
	name, table string
	def         string // pg_get_indexdef
	constraint  string // "PRIMARY KEY" or "UNIQUE", or ""
	fillFactor  int    // to build it with, or 0
	built       bool
}

// dropIndexes drops the indexes of the filled tables that no foreign key
// needs, and the constraints they back, and returns how to build them
// again, the biggest first.
func dropIndexes(ctx context.Context, conn *pgx.Conn, log io.Writer) ([]fillJob, error) {
	rows, err := conn.Query(ctx, `
		SELECT i.relname, t.relname, pg_get_indexdef(i.oid),
		       coalesce(CASE c.contype WHEN 'p' THEN 'PRIMARY KEY' WHEN 'u' THEN 'UNIQUE' END, ''),
		       c.contype IS NOT NULL AND c.contype NOT IN ('p', 'u') OR i.reloptions IS NOT NULL
		FROM pg_index x
		JOIN pg_class i ON i.oid = x.indexrelid
		JOIN pg_class t ON t.oid = x.indrelid
		LEFT JOIN pg_constraint c ON c.conindid = i.oid AND c.conrelid = t.oid AND c.contype <> 'f'
		WHERE t.relname = ANY ($1) AND t.relnamespace = current_schema()::regnamespace
		  AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.conindid = i.oid AND f.contype = 'f')
		ORDER BY array_position($1, t.relname::text), i.relname`, fillTables)
	if err != nil {
		return nil, fmt.Errorf("fill: error reading index definitions: %w", err)
	}
	var saved []*savedIndex
	for rows.Next() {
		var s savedIndex
		var special bool
		if err := rows.Scan(&s.name, &s.table, &s.def, &s.constraint, &special); err != nil {
			return nil, err
		}
		if special {
			fmt.Fprintf(log, "fill: %s is not a plain index; it stays in place\n", s.name)
			continue
		}
		if slices.Contains(randomIndexes, s.name) {
			s.fillFactor = randomIndexFillFactor
		}
		saved = append(saved, &s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fill: error reading index definitions: %w", err)
	}
	var jobs []fillJob
	for _, s := range saved {
		drop := "DROP INDEX " + pgx.Identifier{s.name}.Sanitize()
		if s.constraint != "" {
			drop = "ALTER TABLE " + pgx.Identifier{s.table}.Sanitize() + " DROP CONSTRAINT " + pgx.Identifier{s.name}.Sanitize()
		}
		if _, err := conn.Exec(ctx, drop); err != nil {
			return jobs, fmt.Errorf("fill: error dropping %s for the fill: %w", s.name, err)
		}
		jobs = append(jobs, fillJob{what: s.name, index: s})
	}
	return jobs, nil
}

// create builds the index again as it was defined, and its constraint.
func (s *savedIndex) create(ctx context.Context, conn *pgx.Conn) error {
	name, table := pgx.Identifier{s.name}.Sanitize(), pgx.Identifier{s.table}.Sanitize()
	statements := []string{s.def}
	if s.fillFactor > 0 {
		def, where, partial := strings.Cut(s.def, " WHERE ")
		def = fmt.Sprintf("%s WITH (fillfactor = %d)", def, s.fillFactor)
		if partial {
			def += " WHERE " + where
		}
		statements = []string{def, "ALTER INDEX " + name + " RESET (fillfactor)"}
	}
	if s.constraint != "" {
		statements = append(statements, "ALTER TABLE "+table+" ADD CONSTRAINT "+name+" "+s.constraint+" USING INDEX "+name)
	}
	for _, st := range statements {
		if _, err := conn.Exec(ctx, st); err != nil {
			return fmt.Errorf("fill: error building %s again: %s: %w", s.name, st, err)
		}
	}
	s.built = true
	return nil
}

// restoreIndexes builds the indexes a failed fill left dropped, on a
// connection of its own (the fill's may be broken), so that the database
// keeps its constraints; it says so when it cannot.
func restoreIndexes(ctx context.Context, dbURL string, dropped []fillJob, log io.Writer) {
	var conn *pgx.Conn
	for _, j := range dropped {
		if j.index.built {
			continue
		}
		if conn == nil {
			var err error
			if conn, err = pgx.Connect(ctx, dbURL); err != nil {
				fmt.Fprintf(log, "fill: error restoring the indexes after a failed fill (the database is unfit to measure): %v\n", err)
				return
			}
			defer conn.Close(ctx)
		}
		if err := j.index.create(ctx, conn); err != nil {
			fmt.Fprintf(log, "%v (the database is unfit to measure)\n", err)
		}
	}
}
