package workers_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// leasePool is a fresh database's pool in exec mode, as behind PgBouncer in
// transaction pooling mode: a lease must need nothing that outlives a
// transaction.
func leasePool(t *testing.T) *db.Pool {
	t.Helper()
	return testutil.NewDBInMode(t, pgx.QueryExecModeExec)
}

// leaseHolders counts the holders of lease name.
func leaseHolders(t *testing.T, pool *db.Pool, name string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM worker_leases WHERE name = $1", name).Scan(&n))
	return n
}

func TestTwoRunsContendForALeaseAndOneRuns(t *testing.T) {
	t.Parallel()
	pool := leasePool(t)
	var running, most atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	run := func(ctx context.Context) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		started <- struct{}{}
		<-release
		return nil
	}
	var waits []func() error
	for range 2 {
		waits = append(waits, testutil.Go(t, func(t testing.TB) error {
			return workers.RunLeased(context.Background(), pool, "contended", time.Second, run)
		}))
	}
	<-started
	time.Sleep(300 * time.Millisecond) // the other run tries the lease meanwhile
	require.EqualValues(t, 1, running.Load(), "one run holds the lease, the other waits")
	require.Equal(t, 1, leaseHolders(t, pool, "contended"))
	close(release)
	for _, wait := range waits {
		require.NoError(t, wait())
	}
	require.Len(t, started, 1, "the second ran after the first")
	require.EqualValues(t, 1, most.Load(), "never both at once")
	require.Zero(t, leaseHolders(t, pool, "contended"), "released")
}

func TestAWaitingRunGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	pool := leasePool(t)
	holding, release := make(chan struct{}), make(chan struct{})
	wait := testutil.Go(t, func(t testing.TB) error {
		return workers.RunLeased(context.Background(), pool, "held", time.Second, func(context.Context) error {
			close(holding)
			<-release
			return nil
		})
	})
	<-holding
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	ran := false
	err := workers.RunLeased(ctx, pool, "held", time.Second, func(context.Context) error { ran = true; return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, ran)
	close(release)
	require.NoError(t, wait())
}

func TestADeadHoldersLeaseIsTakenAfterItExpires(t *testing.T) {
	t.Parallel()
	pool := leasePool(t)
	ctx := context.Background()
	// A holder that took the lease and died: nobody renews it.
	_, err := pool.Exec(ctx, `INSERT INTO worker_leases (name, holder, taken_at, expires_at)
		VALUES ('orphaned', gen_random_uuid(), now(), now() + interval '500 milliseconds')`)
	require.NoError(t, err)
	var expiresAt time.Time
	require.NoError(t, pool.QueryRow(ctx, "SELECT expires_at FROM worker_leases").Scan(&expiresAt))

	var ranAt time.Time
	require.NoError(t, workers.RunLeased(ctx, pool, "orphaned", time.Second, func(ctx context.Context) error {
		require.NoError(t, pool.QueryRow(ctx, "SELECT now()").Scan(&ranAt))
		return nil
	}))
	require.False(t, ranAt.Before(expiresAt), "ran at %s, before the dead holder's lease expired at %s", ranAt, expiresAt)
	require.Zero(t, leaseHolders(t, pool, "orphaned"))
}

func TestAReleasedLeaseIsFreeAtOnce(t *testing.T) {
	t.Parallel()
	pool := leasePool(t)
	// A long lease: a second run that had to wait it out would miss its
	// short deadline.
	const ttl = time.Minute
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := workers.RunLeased(ctx, pool, "released", ttl, func(context.Context) error { return nil })
		cancel()
		require.NoError(t, err)
	}
	// f's own error is returned, and the lease is released still.
	boom := errors.New("boom")
	require.ErrorIs(t, workers.RunLeased(context.Background(), pool, "released", ttl, func(context.Context) error { return boom }), boom)
	require.Zero(t, leaseHolders(t, pool, "released"))
}

func TestARunKeepsItsLeasePastItsLength(t *testing.T) {
	t.Parallel()
	pool := leasePool(t)
	// Renewed every third of a second: a loaded machine's pauses stay
	// well within the lease.
	const ttl = time.Second
	holding, release := make(chan struct{}), make(chan struct{})
	wait := testutil.Go(t, func(t testing.TB) error {
		return workers.RunLeased(context.Background(), pool, "long", ttl, func(ctx context.Context) error {
			close(holding)
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		})
	})
	<-holding
	// Three lease lengths: without renewals, the other would take it.
	ctx, cancel := context.WithTimeout(context.Background(), 3*ttl)
	defer cancel()
	err := workers.RunLeased(ctx, pool, "long", ttl, func(context.Context) error { return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded, "the first run renewed its lease")
	close(release)
	require.NoError(t, wait(), "the first run kept its lease")
}

func TestARunThatLostItsLeaseIsCancelled(t *testing.T) {
	t.Parallel()
	pool := leasePool(t)
	const ttl = 300 * time.Millisecond
	holding := make(chan struct{})
	wait := testutil.Go(t, func(t testing.TB) error {
		return workers.RunLeased(context.Background(), pool, "stolen", ttl, func(ctx context.Context) error {
			close(holding)
			<-ctx.Done()
			return context.Cause(ctx)
		})
	})
	<-holding
	// Another holder has it now, as after a renewal that came too late.
	_, err := pool.Exec(context.Background(), "UPDATE worker_leases SET holder = gen_random_uuid() WHERE name = 'stolen'")
	require.NoError(t, err)
	require.ErrorIs(t, wait(), workers.ErrLeaseLost)
	require.Equal(t, 1, leaseHolders(t, pool, "stolen"), "the new holder's lease is left alone")
}
