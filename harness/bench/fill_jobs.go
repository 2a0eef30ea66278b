package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

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
		"{{AUDIT_BASE}}", d(p.auditBase),
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
