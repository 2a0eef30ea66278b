package chaos

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Drain is how the service settled after the faults stopped.
type Drain struct {
	// KeysDone is set when no key was left unfinished and every client had
	// stopped, KeysAfter after the faults stopped.
	KeysDone  bool
	KeysAfter time.Duration
	// Unfinished is the last count of unfinished keys seen.
	Unfinished int64
	// ReceiptsDone is set when the receipt outbox was empty, ReceiptsAfter
	// after the faults stopped.
	ReceiptsDone  bool
	ReceiptsAfter time.Duration
	// PendingReceipts is the last count of receipts in the outbox.
	PendingReceipts int64
}

const (
	countUnfinished      = `SELECT count(*) FROM idempotency_keys WHERE recovery_point <> 'finished' AND needs_attention_at IS NULL`
	countPendingReceipts = `SELECT count(*) FROM receipt_outbox`
)

// WaitDrain waits, until since+bound, for every key to finish (with every
// client stopped, so that no key is still on its way in) and then for every
// receipt in the outbox to go out.
func WaitDrain(ctx context.Context, pool *pgxpool.Pool, ev *Events, since time.Time, bound time.Duration,
	clientsDone <-chan struct{}) Drain {
	ctx, cancel := context.WithDeadline(ctx, since.Add(bound))
	defer cancel()
	var d Drain
	done := false
	d.KeysDone = poll(ctx, ev, "unfinished keys", &d.Unfinished, func(log bool) bool {
		select {
		case <-clientsDone:
			done = true
		default:
		}
		if err := pool.QueryRow(ctx, countUnfinished).Scan(&d.Unfinished); err != nil {
			ev.Logf(EventHarnessErr, "counting unfinished keys: %v", err)
			return false
		}
		if log && d.Unfinished > 0 {
			logUnfinished(ctx, pool, ev)
		}
		return done && d.Unfinished == 0
	})
	if d.KeysDone {
		d.KeysAfter = time.Since(since)
	}
	d.ReceiptsDone = poll(ctx, ev, "receipts in the outbox", &d.PendingReceipts, func(bool) bool {
		if err := pool.QueryRow(ctx, countPendingReceipts).Scan(&d.PendingReceipts); err != nil {
			ev.Logf(EventHarnessErr, "counting the receipt outbox: %v", err)
			return false
		}
		return d.PendingReceipts == 0
	})
	if d.ReceiptsDone {
		d.ReceiptsAfter = time.Since(since)
	}
	return d
}

// poll calls check every 250 ms until it returns true (then poll does) or
// ctx ends (then poll returns false). Every 5 s it logs the count of what it
// waits for, after a check told to log what it sees.
func poll(ctx context.Context, ev *Events, what string, count *int64, check func(log bool) bool) bool {
	last := time.Now()
	for {
		log := time.Since(last) >= 5*time.Second
		if check(log) {
			return true
		}
		if log {
			last = time.Now()
			ev.Logf(EventProgress, "draining: %d %s", *count, what)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// logUnfinished logs the three unfinished keys that waited longest, and why:
// what a drain that takes long is waiting for.
func logUnfinished(ctx context.Context, pool *pgxpool.Pool, ev *Events) {
	rows, err := pool.Query(ctx, `SELECT idempotency_key, recovery_point, runs, locked_by IS NOT NULL,
			extract(epoch FROM now() - last_run_at)::int, coalesce(left(last_error, 160), '')
		FROM idempotency_keys WHERE recovery_point <> 'finished' AND needs_attention_at IS NULL
		ORDER BY last_run_at LIMIT 3`)
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key, point, lastErr string
			runs, idle          int
			locked              bool
		)
		if rows.Scan(&key, &point, &runs, &locked, &idle, &lastErr) == nil {
			ev.Logf(EventProgress, "  unfinished: %s at %s, %d runs, leased %v, last run %ds ago: %s", key, point, runs, locked, idle, lastErr)
		}
	}
}
