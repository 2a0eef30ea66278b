package workers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

func TestExactlyOneReceiptPerPayment(t *testing.T) {
	t.Parallel()
	b := setupService(t, testutil.ServiceOptions{})
	resp := b.svc.PostPayment(t, b.apiKey, "k", visa)
	require.Equal(t, http.StatusCreated, resp.Status)
	testutil.WaitFor(t, 10*time.Second, 20*time.Millisecond, func() bool {
		return b.count(t, "SELECT count(*) FROM receipts") == 1 && b.count(t, "SELECT count(*) FROM receipt_outbox") == 0
	})

	// The same payment in the outbox again (a River job of the previous
	// version that finished after the upgrade moved it) is taken out
	// without a second receipt.
	b.exec(t, "INSERT INTO receipt_outbox (payment_id) SELECT id FROM payments")
	testutil.WaitFor(t, 10*time.Second, 20*time.Millisecond, func() bool {
		return b.count(t, "SELECT count(*) FROM receipt_outbox") == 0
	})
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM receipts"))

	// Declines get no receipt.
	decline := b.svc.PostPayment(t, b.apiKey, "declined", `{"amount": 100, "currency": "usd", "payment_method": "pm_card_chargeDeclined"}`)
	require.Equal(t, http.StatusPaymentRequired, decline.Status)
	require.Zero(t, b.count(t, "SELECT count(*) FROM receipt_outbox"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM receipts"))
}

// outbox is a database with n succeeded payments in the receipt outbox,
// oldest (first to be claimed) first: run_at is staggered so that the claim
// order is the order of ids.
func outbox(t *testing.T, n int) (*db.Pool, []int64) {
	t.Helper()
	pool := testutil.NewDB(t)
	ctx := context.Background()
	var userID int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO users (email, api_key_hash) VALUES ('r@example.com', sha256('r')) RETURNING id`).Scan(&userID))
	rows, err := pool.Query(ctx, `
		WITH p AS (
			INSERT INTO payments (user_id, amount, currency, payment_method, status)
			SELECT $1, 100 + i, 'usd', 'pm_card_visa', 'succeeded' FROM generate_series(1, $2) AS i
			RETURNING id
		), o AS (
			INSERT INTO receipt_outbox (payment_id, created_at, run_at)
			SELECT id, now() - interval '1 hour' + id * interval '1 ms', now() - interval '1 hour' + id * interval '1 ms' FROM p
		)
		SELECT id FROM p ORDER BY id`, userID, n)
	require.NoError(t, err)
	var ids []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return pool, ids
}

// recorder is a Deliverer that counts deliveries per payment and fails
// those in failing.
type recorder struct {
	mu        sync.Mutex
	delivered map[int64]int
	failing   map[int64]bool
}

func (r *recorder) Deliver(_ context.Context, rc *workers.Receipt) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failing[rc.PaymentID] {
		return errors.New("mail server unavailable")
	}
	if r.delivered == nil {
		r.delivered = map[int64]int{}
	}
	r.delivered[rc.PaymentID]++
	return nil
}

func count(t *testing.T, pool *db.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func TestReceiptsGoOutInBatchesOfOneTransaction(t *testing.T) {
	t.Parallel()
	pool, ids := outbox(t, 250)
	rec := &recorder{}
	d := &workers.Dispatcher{Pool: pool, Deliverer: rec, Config: workers.DispatcherConfig{BatchSize: 100}, Log: testutil.Logger(t)}

	n, err := d.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 100, n)
	// Every row a transaction writes carries its id (xmin).
	require.Equal(t, 1, count(t, pool, "SELECT count(DISTINCT xmin::text) FROM receipts"), "100 receipts, one transaction")
	require.Equal(t, 100, count(t, pool, "SELECT count(*) FROM receipts"))
	require.Equal(t, 150, count(t, pool, "SELECT count(*) FROM receipt_outbox"))

	for n != 0 {
		n, err = d.Drain(context.Background())
		require.NoError(t, err)
	}
	require.Len(t, rec.delivered, len(ids))
	for _, id := range ids {
		require.Equal(t, 1, rec.delivered[id], "payment %d", id)
	}
	require.Equal(t, len(ids), count(t, pool, "SELECT count(*) FROM receipts"))
	require.Zero(t, count(t, pool, "SELECT count(*) FROM receipt_outbox"))

	require.Equal(t, 3, count(t, pool, "SELECT count(DISTINCT xmin::text) FROM receipts"), "250 receipts, three transactions")
}

func TestAFailedDeliveryWaitsInTheOutbox(t *testing.T) {
	t.Parallel()
	pool, ids := outbox(t, 5)
	rec := &recorder{failing: map[int64]bool{ids[2]: true}}
	d := &workers.Dispatcher{Pool: pool, Deliverer: rec, Log: testutil.Logger(t)}
	n, err := d.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.Len(t, rec.delivered, 4)
	require.Equal(t, 4, count(t, pool, "SELECT count(*) FROM receipts"))
	require.Equal(t, 0, count(t, pool, "SELECT count(*) FROM receipts WHERE payment_id = $1", ids[2]))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM receipt_outbox
		WHERE payment_id = $1 AND attempts = 1 AND run_at > now() AND last_error = 'mail server unavailable'`, ids[2]))

	// Put off: the next batch does not take it until its time comes.
	n, err = d.Drain(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)

	delete(rec.failing, ids[2])
	_, err = pool.Exec(context.Background(), "UPDATE receipt_outbox SET run_at = now()")
	require.NoError(t, err)
	n, err = d.Drain(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, rec.delivered[ids[2]])
	require.Equal(t, 5, count(t, pool, "SELECT count(*) FROM receipts"))
	require.Zero(t, count(t, pool, "SELECT count(*) FROM receipt_outbox"))
}

func TestConcurrentDispatchersDeliverEachReceiptOnce(t *testing.T) {
	t.Parallel()
	pool, ids := outbox(t, 600)
	rec := &recorder{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		d := &workers.Dispatcher{Pool: pool, Deliverer: rec, Config: workers.DispatcherConfig{BatchSize: 25}, Log: testutil.Logger(t)}
		wg.Go(func() {
			for {
				n, err := d.Drain(context.Background())
				if err != nil {
					errs <- err
					return
				}
				if n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, rec.delivered, len(ids))
	for _, id := range ids {
		require.Equal(t, 1, rec.delivered[id], fmt.Sprintf("payment %d", id))
	}
	require.Equal(t, len(ids), count(t, pool, "SELECT count(*) FROM receipts"))
}

func TestABatchCutShortRecordsNothing(t *testing.T) {
	t.Parallel()
	pool, ids := outbox(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	d := &workers.Dispatcher{Pool: pool, Deliverer: cancelling{cancel}, Log: testutil.Logger(t)}
	_, err := d.Drain(ctx)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, count(t, pool, "SELECT count(*) FROM receipts"))
	require.Equal(t, len(ids), count(t, pool, "SELECT count(*) FROM receipt_outbox WHERE attempts = 0"))
}

// cancelling is a Deliverer whose process dies mid-batch.
type cancelling struct{ cancel context.CancelFunc }

func (c cancelling) Deliver(ctx context.Context, _ *workers.Receipt) error {
	c.cancel()
	return ctx.Err()
}
