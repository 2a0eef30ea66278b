package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// statsFlushLag is how long Postgres may keep a backend's counters before
// they show in pg_stat_database: a busy backend flushes at most once a
// second, an idle one after a ten-second timeout.
const statsFlushLag = 11 * time.Second

// Reading is one reading of the bench database's commit counters.
type Reading struct {
	At time.Time
	// Xact is pg_stat_database.xact_commit of the bench database.
	Xact int64
	// Xid is the cluster's next transaction id: it grows by one for every
	// transaction that wrote anything, in any database.
	Xid int64
	// LSN is the WAL position flushed so far.
	LSN string
}

// Watcher reads the counters over a connection to another database, so
// that reading them adds nothing to what they count.
type Watcher struct {
	conn *pgx.Conn
	db   string
	// quiet is when the bench database was last used by anyone the
	// benchmark controls; Settle waits for its counters to catch up.
	quiet time.Time
}

// NewWatcher connects to adminURL to watch database db.
func NewWatcher(ctx context.Context, adminURL, db string) (*Watcher, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("error connecting to %s: %w", redact(adminURL), err)
	}
	return &Watcher{conn: conn, db: db, quiet: time.Now()}, nil
}

// Close closes the connection.
func (w *Watcher) Close(ctx context.Context) { _ = w.conn.Close(ctx) }

// Touched records that the bench database was just used.
func (w *Watcher) Touched() { w.quiet = time.Now() }

// Read takes a reading now.
func (w *Watcher) Read(ctx context.Context) (Reading, error) {
	r := Reading{At: time.Now()}
	err := w.conn.QueryRow(ctx, `
		SELECT xact_commit, pg_snapshot_xmax(pg_current_snapshot())::text::bigint, pg_current_wal_flush_lsn()::text
		FROM pg_stat_database WHERE datname = $1`, w.db).Scan(&r.Xact, &r.Xid, &r.LSN)
	if err != nil {
		return r, fmt.Errorf("error reading pg_stat_database: %w", err)
	}
	return r, nil
}

// Settle waits until everything done to the bench database before the last
// Touched shows in its counters, then takes a reading.
func (w *Watcher) Settle(ctx context.Context) (Reading, error) {
	if err := sleep(ctx, time.Until(w.quiet.Add(statsFlushLag))); err != nil {
		return Reading{}, err
	}
	return w.Read(ctx)
}

// AfterExit takes a reading once the backends of a client that just exited
// (pgbench) have flushed their counters, which they do as they exit.
func (w *Watcher) AfterExit(ctx context.Context) (Reading, error) {
	if err := sleep(ctx, 500*time.Millisecond); err != nil {
		return Reading{}, err
	}
	return w.Read(ctx)
}

// MeasureNoise reads the background rate of the counters over an idle
// interval of length d, starting once earlier activity has settled. wal,
// when not nil, counts the writing transactions too.
func (w *Watcher) MeasureNoise(ctx context.Context, d time.Duration, wal *WAL) (Noise, error) {
	a, err := w.Settle(ctx)
	if err != nil {
		return Noise{}, err
	}
	if err := sleep(ctx, d); err != nil {
		return Noise{}, err
	}
	b, err := w.Read(ctx)
	if err != nil {
		return Noise{}, err
	}
	secs := b.At.Sub(a.At).Seconds()
	n := Noise{
		Seconds:    secs,
		XactPerSec: float64(b.Xact-a.Xact) / secs,
		XidPerSec:  float64(b.Xid-a.Xid) / secs,
	}
	if wal != nil {
		writes, err := wal.Writes(ctx, a, b)
		w.Touched()
		if err != nil {
			return n, err
		}
		n.WritesPerSec = float64(writes.All) / secs
		n.PhaseWritesPerSec = float64(writes.Phases) / secs
	}
	return n, nil
}

// commitsOf accounts a fresh run between readings a and b: payments
// created, harness queries made on the bench database inside the window,
// and what the WAL shows (nil when it could not be read), all net of the
// background noise.
func commitsOf(a, b Reading, payments, harness int, writes *Writes, noise Noise) Commits {
	c := Commits{
		Payments:      payments,
		WindowSeconds: b.At.Sub(a.At).Seconds(),
		Xact:          b.Xact - a.Xact,
		Xid:           b.Xid - a.Xid,
		Writes:        -1,
		PhaseWrites:   -1,
	}
	if payments == 0 {
		return c
	}
	per := func(delta float64, rate float64) float64 {
		return (delta - rate*c.WindowSeconds) / float64(payments)
	}
	c.XactPerPayment = per(float64(c.Xact-int64(harness)), noise.XactPerSec)
	c.XidPerPayment = per(float64(c.Xid), noise.XidPerSec)
	if writes != nil {
		c.Writes, c.PhaseWrites = writes.All, writes.Phases
		c.WritesPerPayment = per(float64(writes.All), noise.WritesPerSec)
		c.PhaseCommitsPerPayment = per(float64(writes.Phases), noise.PhaseWritesPerSec)
	}
	return c
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
