package workers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// completerLease names the worker lease a completer run holds.
const completerLease = "completer"

// DefaultRunLease is how long a run's worker lease lasts unless renewed:
// how long a run that died holds the next one back.
const DefaultRunLease = 15 * time.Second

// leasePoll is how often a run waiting for a worker lease tries again.
const leasePoll = 100 * time.Millisecond

// releaseTimeout bounds giving a lease up, so a dead connection cannot
// hold a run's end (and a shutdown) up; an unreleased lease expires.
const releaseTimeout = 5 * time.Second

// ErrLeaseLost is the cause of a run's cancelled context when its worker
// lease was taken by another holder, or could not be renewed before it
// would expire.
var ErrLeaseLost = errors.New("the run's worker lease was lost")

// runLeased runs f while this run holds the worker lease name (a row of
// worker_leases), so that two runs never overlap, in this process or
// another. It waits, as long as ctx lets it, while another holder's lease
// lasts; it renews the lease every third of ttl while f runs, and gives it
// up when f returns.
//
// Each of these is a statement of its own: no session state outlives a
// transaction, so the lease works through PgBouncer in transaction pooling
// mode. A holder that dies stops renewing, and its lease may be taken ttl
// after its last renewal.
//
// Should the lease be lost (another holder took it after a renewal came
// too late, or none could be made before it would expire), f's context is
// cancelled with cause ErrLeaseLost. What f does must stay safe regardless
// (the completer's keys are leased and fenced): the lease keeps runs from
// overlapping, it does not make them correct.
func runLeased(ctx context.Context, pool *db.Pool, name string, ttl time.Duration, f func(ctx context.Context) error) error {
	q := dbsqlc.New()
	holder := uuid.New()
	var takenAt time.Time
	for {
		takenAt = time.Now() // no later than the database's now() the lease runs from
		taken, err := q.WorkerLeaseTake(ctx, pool, &dbsqlc.WorkerLeaseTakeParams{Name: name, Holder: holder, TtlSeconds: ttl.Seconds()})
		if err != nil {
			return fmt.Errorf("error taking the %s lease: %w", name, err)
		}
		if taken == 1 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("error waiting for the %s lease: %w", name, context.Cause(ctx))
		case <-time.After(leasePoll):
		}
	}

	runCtx, cancel := context.WithCancelCause(ctx)
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		keepLease(runCtx, cancel, pool, name, holder, ttl, takenAt)
	}()
	defer func() {
		cancel(nil)
		<-kept
		ctx, cancelRelease := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancelRelease()
		// An error leaves the lease to expire.
		_, _ = q.WorkerLeaseRelease(ctx, pool, &dbsqlc.WorkerLeaseReleaseParams{Name: name, Holder: holder})
	}()
	return f(runCtx)
}

// keepLease renews holder's lease name every third of ttl until ctx ends,
// and calls lost when the lease was taken by another holder or could not be
// renewed before it would expire. renewedAt is when the lease was taken,
// by this process's clock, no later than the database's.
func keepLease(ctx context.Context, lost context.CancelCauseFunc, pool *db.Pool, name string, holder uuid.UUID,
	ttl time.Duration, renewedAt time.Time) {
	every := ttl / 3
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	renew := &dbsqlc.WorkerLeaseRenewParams{Name: name, Holder: holder, TtlSeconds: ttl.Seconds()}
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		sent := time.Now()
		renewCtx, cancel := context.WithTimeout(ctx, every)
		n, err := dbsqlc.New().WorkerLeaseRenew(renewCtx, pool, renew)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && n == 1:
			renewedAt = sent
		case err == nil:
			lost(ErrLeaseLost)
			return
		case time.Since(renewedAt)+every >= ttl:
			// The next try would come after the lease expired.
			lost(fmt.Errorf("%w: error renewing it: %w", ErrLeaseLost, err))
			return
		}
	}
}
