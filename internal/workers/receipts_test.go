package workers_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
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

// Defect: migration 00015 moves the receipt jobs that exist when it runs,
// and says a process of the previous version may still be running then.
// Such a process keeps taking payments and enqueues their receipts as River
// jobs, after the move. No process of the new version had a worker for
// them: its River client fetched them and failed them as an unknown kind
// (and its leader's rescuer discarded them), nothing moved them to the
// outbox, and once the old processes were gone those receipts were never
// delivered. LegacyReceiptWorker now moves them into the outbox.
func TestAReceiptJobOfThePreviousVersionReachesTheOutbox(t *testing.T) {
	t.Parallel()
	pool := testutil.NewDB(t) // migrated to the latest version: 00015 has run
	ctx := context.Background()

	// A payment an old process finished after the migration, with its
	// receipt job inserted the way the old process inserted it.
	var userID, paymentID int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO users (email, api_key_hash) VALUES ('old@example.com', sha256('old')) RETURNING id`).Scan(&userID))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO payments (user_id, amount, currency, payment_method, status)
		VALUES ($1, 2000, 'usd', 'pm_card_visa', 'succeeded') RETURNING id`, userID).Scan(&paymentID))
	oldClient, err := river.NewClient(riverpgxv5.New(pool.Driver()), &river.Config{})
	require.NoError(t, err)
	tx, err := pool.Driver().Begin(ctx)
	require.NoError(t, err)
	_, err = oldClient.InsertTx(ctx, tx, oldReceiptArgs{PaymentID: paymentID}, nil)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	// The old process stops; the new version serves.
	testutil.StartService(t, testutil.ServiceOptions{Pool: pool})
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) && count(t, pool, "SELECT count(*) FROM receipts WHERE payment_id = $1", paymentID) == 0 {
		time.Sleep(100 * time.Millisecond)
	}
	var state string
	var errs []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state::text, coalesce((SELECT array_agg(e->>'error') FROM jsonb_array_elements(to_jsonb(errors)) AS e), '{}')
		FROM river_job WHERE kind = 'receipt'`).Scan(&state, &errs))
	sort.Strings(errs)
	require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM receipts WHERE payment_id = $1", paymentID)+
		count(t, pool, "SELECT count(*) FROM receipt_outbox WHERE payment_id = $1", paymentID),
		"payment %d's receipt is neither recorded nor in the outbox after 8s; its River job is %s with errors %q", paymentID, state, errs)
}

// Two serve processes on one database, payments through both: each receipt
// is delivered once (counted at the Deliverer) and recorded once.
func TestTwoServeProcessesDeliverEachReceiptOnce(t *testing.T) {
	t.Parallel()
	pool := testutil.NewDB(t)
	m := &mailer{}
	opts := testutil.ServiceOptions{Pool: pool}
	opts.Workers.Deliverer = m
	opts.Workers.Receipts = workers.DispatcherConfig{Interval: 10 * time.Millisecond, BatchSize: 3}
	a, b := testutil.StartService(t, opts), testutil.StartService(t, opts)
	_, apiKey := a.NewUser(t)
	waits := make([]func() int, 40)
	for i := range waits {
		svc := a
		if i%2 == 1 {
			svc = b
		}
		waits[i] = testutil.Go(t, func(t testing.TB) int {
			return svc.PostPayment(t, apiKey, fmt.Sprintf("two-%d", i), `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa"}`).Status
		})
	}
	for _, wait := range waits {
		require.Equal(t, 201, wait())
	}
	testutil.WaitFor(t, 10*time.Second, 20*time.Millisecond, func() bool {
		return count(t, pool, "SELECT count(*) FROM receipt_outbox") == 0
	})
	require.Equal(t, 40, count(t, pool, "SELECT count(*) FROM receipts"))
	delivered := m.counts()
	require.Len(t, delivered, 40)
	for id, n := range delivered {
		require.Equal(t, 1, n, "payment %d", id)
	}
}

// TestDispatcher covers Dispatcher.Drain and Dispatcher.Run over an outbox
// filled by hand: batches, failed, slow, hanging and panicking deliveries,
// and a shutdown mid-batch.
func TestDispatcher(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		ids  []int64 // the payments whose receipts wait in the outbox, oldest first
		pool *db.Pool
	}

	// setup makes a database with receipts succeeded payments in the outbox
	// (outbox) and a dispatcher over it that logs to the test; a test gives
	// the dispatcher its Deliverer and its Config.
	setup := func(t *testing.T, receipts int) (*workers.Dispatcher, *testBundle) {
		t.Helper()
		pool, ids := outbox(t, receipts)
		return &workers.Dispatcher{Pool: pool, Log: testutil.Logger(t)}, &testBundle{ids: ids, pool: pool}
	}

	t.Run("ReceiptsGoOutInBatchesOfOneTransaction", func(t *testing.T) {
		t.Parallel()
		d, bundle := setup(t, 250)
		rec := &recorder{}
		d.Deliverer, d.Config = rec, workers.DispatcherConfig{BatchSize: 100}

		n, err := d.Drain(context.Background())
		require.NoError(t, err)
		require.Equal(t, 100, n)
		// Every row a transaction writes carries its id (xmin).
		require.Equal(t, 1, count(t, bundle.pool, "SELECT count(DISTINCT xmin::text) FROM receipts"), "100 receipts, one transaction")
		require.Equal(t, 100, count(t, bundle.pool, "SELECT count(*) FROM receipts"))
		require.Equal(t, 150, count(t, bundle.pool, "SELECT count(*) FROM receipt_outbox"))

		for n != 0 {
			n, err = d.Drain(context.Background())
			require.NoError(t, err)
		}
		require.Len(t, rec.delivered, len(bundle.ids))
		for _, id := range bundle.ids {
			require.Equal(t, 1, rec.delivered[id], "payment %d", id)
		}
		require.Equal(t, len(bundle.ids), count(t, bundle.pool, "SELECT count(*) FROM receipts"))
		require.Zero(t, count(t, bundle.pool, "SELECT count(*) FROM receipt_outbox"))

		require.Equal(t, 3, count(t, bundle.pool, "SELECT count(DISTINCT xmin::text) FROM receipts"), "250 receipts, three transactions")
	})

	t.Run("AFailedDeliveryWaitsInTheOutbox", func(t *testing.T) {
		t.Parallel()
		d, bundle := setup(t, 5)
		rec := &recorder{failing: map[int64]bool{bundle.ids[2]: true}}
		d.Deliverer = rec
		n, err := d.Drain(context.Background())
		require.NoError(t, err)
		require.Equal(t, 5, n)
		require.Len(t, rec.delivered, 4)
		require.Equal(t, 4, count(t, bundle.pool, "SELECT count(*) FROM receipts"))
		require.Equal(t, 0, count(t, bundle.pool, "SELECT count(*) FROM receipts WHERE payment_id = $1", bundle.ids[2]))
		require.Equal(t, 1, count(t, bundle.pool, `SELECT count(*) FROM receipt_outbox
			WHERE payment_id = $1 AND attempts = 1 AND run_at > now() AND last_error = 'mail server unavailable'`, bundle.ids[2]))

		// Put off: the next batch does not take it until its time comes.
		n, err = d.Drain(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)

		delete(rec.failing, bundle.ids[2])
		_, err = bundle.pool.Exec(context.Background(), "UPDATE receipt_outbox SET run_at = now()")
		require.NoError(t, err)
		n, err = d.Drain(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, 1, rec.delivered[bundle.ids[2]])
		require.Equal(t, 5, count(t, bundle.pool, "SELECT count(*) FROM receipts"))
		require.Zero(t, count(t, bundle.pool, "SELECT count(*) FROM receipt_outbox"))
	})

	t.Run("ConcurrentDispatchersDeliverEachReceiptOnce", func(t *testing.T) {
		t.Parallel()
		_, bundle := setup(t, 600) // four dispatchers of the test's own over its outbox
		rec := &recorder{}
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			d := &workers.Dispatcher{Pool: bundle.pool, Deliverer: rec, Config: workers.DispatcherConfig{BatchSize: 25}, Log: testutil.Logger(t)}
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
		require.Len(t, rec.delivered, len(bundle.ids))
		for _, id := range bundle.ids {
			require.Equal(t, 1, rec.delivered[id], fmt.Sprintf("payment %d", id))
		}
		require.Equal(t, len(bundle.ids), count(t, bundle.pool, "SELECT count(*) FROM receipts"))
	})

	// A receipt states what was charged. An automatic payment is captured
	// whole; a manual one captured in part was charged less than it
	// authorized, and its receipt (delivered and recorded) says so.
	t.Run("AReceiptStatesWhatWasCaptured", func(t *testing.T) {
		t.Parallel()
		d, bundle := setup(t, 2)
		partial := bundle.ids[1]
		_, err := bundle.pool.Exec(context.Background(), `UPDATE payments
			SET capture_method = 'manual', amount = 2000, amount_captured = 700 WHERE id = $1`, partial)
		require.NoError(t, err)
		rec := &recorder{}
		d.Deliverer, d.Config = rec, workers.DispatcherConfig{BatchSize: 10}

		n, err := d.Drain(context.Background())
		require.NoError(t, err)
		require.Equal(t, 2, n)
		whole := bundle.ids[0]
		require.EqualValues(t, 101, rec.amounts[whole], "the automatic payment's receipt states its amount")
		require.EqualValues(t, 700, rec.amounts[partial], "the partial capture's receipt states what was captured")
		require.Equal(t, 101, count(t, bundle.pool, "SELECT amount FROM receipts WHERE payment_id = $1", whole))
		require.Equal(t, 700, count(t, bundle.pool, "SELECT amount FROM receipts WHERE payment_id = $1", partial))
	})

	t.Run("ABatchCutShortRecordsNothing", func(t *testing.T) {
		t.Parallel()
		d, bundle := setup(t, 3)
		ctx, cancel := context.WithCancel(context.Background())
		d.Deliverer = cancelling{cancel}
		_, err := d.Drain(ctx)
		require.ErrorIs(t, err, context.Canceled)
		require.Zero(t, count(t, bundle.pool, "SELECT count(*) FROM receipts"))
		require.Equal(t, len(bundle.ids), count(t, bundle.pool, "SELECT count(*) FROM receipt_outbox WHERE attempts = 0"))
	})

	// Defect: BatchTimeout bounds the whole batch, but the batch delivered its
	// receipts one after another. When the deliveries of one batch took longer
	// together than BatchTimeout (with the defaults: 100 receipts at more than
	// 150 ms each, an ordinary SMTP round trip), every batch was cut short and
	// rolled back after it delivered most of its receipts: nothing was ever
	// recorded, the same receipts were mailed again every BatchTimeout, for
	// ever, and the outbox only grew. A batch past BatchTimeout now starts no
	// more deliveries, and commits what it delivered.
	//
	// Scaled down here: 10 receipts a batch, 60 ms a delivery, a 400 ms batch
	// timeout. Every delivery succeeds.
	t.Run("SlowDeliveriesStillCommitTheirBatch", func(t *testing.T) {
		t.Parallel()
		d, bundle := setup(t, 10)
		m := &mailer{perDelivery: 60 * time.Millisecond}
		d.Deliverer, d.Config = m, workers.DispatcherConfig{
			BatchSize: 10, BatchTimeout: 400 * time.Millisecond, Interval: 20 * time.Millisecond,
		}
		require.Nil(t, runDispatcher(d, 3*time.Second))

		delivered := m.counts()
		t.Logf("deliveries per payment after 3s: %v", delivered)
		recorded := count(t, bundle.pool, "SELECT count(*) FROM receipts")
		require.Equal(t, len(bundle.ids), recorded,
			"every delivery succeeded, yet %d of %d receipts are recorded and %d are still in the outbox; deliveries per payment: %v",
			recorded, len(bundle.ids), count(t, bundle.pool, "SELECT count(*) FROM receipt_outbox"), delivered)
		for _, id := range bundle.ids {
			require.Equal(t, 1, delivered[id], "payment %d mailed %d times", id, delivered[id])
		}
	})

	// Defect: one receipt whose delivery hangs (a mail server that accepts the
	// connection and never answers) cut its batch short at BatchTimeout. The
	// rollback forgot that its delivery failed (no attempt counted, run_at not
	// moved), so the same receipt headed the next batch, which hung again: the
	// receipts before it in the batch were mailed again every BatchTimeout,
	// the ones after it (and every receipt enqueued later) never went out, and
	// nothing was recorded, ever. Each delivery now has a timeout of its own,
	// and a delivery that fails is put off.
	t.Run("AHangingDeliveryNeverStallsTheOutbox", func(t *testing.T) {
		t.Parallel()
		d, bundle := setup(t, 5)
		m := &mailer{hang: bundle.ids[2]}
		d.Deliverer, d.Config = m, workers.DispatcherConfig{
			BatchTimeout: 300 * time.Millisecond, Interval: 20 * time.Millisecond,
		}
		require.Nil(t, runDispatcher(d, 3*time.Second))

		delivered := m.counts()
		t.Logf("deliveries per payment after 3s: %v (payment %d hangs)", delivered, bundle.ids[2])
		var attempts int
		require.NoError(t, bundle.pool.QueryRow(context.Background(), "SELECT attempts FROM receipt_outbox WHERE payment_id = $1", bundle.ids[2]).Scan(&attempts))
		var missing []int64
		for _, id := range bundle.ids {
			if id != bundle.ids[2] && count(t, bundle.pool, "SELECT count(*) FROM receipts WHERE payment_id = $1", id) == 0 {
				missing = append(missing, id)
			}
		}
		require.Empty(t, missing, "receipts not recorded behind the hanging one; deliveries per payment: %v; the hanging receipt's attempts: %d", delivered, attempts)
		require.Positive(t, attempts, "the hanging delivery was never counted as failed, so it is never put off")
		for _, id := range bundle.ids {
			if id != bundle.ids[2] {
				require.Equal(t, 1, delivered[id], "payment %d mailed %d times", id, delivered[id])
			}
		}
	})

	// Defect: a failed delivery is put off by writing its error to
	// receipt_outbox.last_error, a text column. The message was made valid
	// UTF-8 only when it was longer than 1000 bytes; a short one went to
	// Postgres as it was. A mail server that answers in Latin-1 ("550
	// Empfänger unbekannt", 0xE4 for the ä) or with a NUL byte made that
	// UPDATE fail, which failed the whole batch: the receipts delivered before
	// it in the batch were rolled back (and mailed again with the next batch),
	// the failing one was not put off, and so every batch from then on met it
	// again. Nothing was recorded as long as that receipt was in the outbox.
	t.Run("ANonUTF8DeliveryErrorNeverPoisonsTheOutbox", func(t *testing.T) {
		t.Parallel()
		for name, msg := range map[string]string{
			"latin-1": "550 5.1.1 Empf\xe4nger unbekannt",
			"NUL":     "550 mailbox unavailable\x00",
		} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				d, bundle := setup(t, 5)
				m := &mailer{failWith: map[int64]string{bundle.ids[2]: msg}}
				d.Deliverer = m
				var errs []error
				for range 3 {
					if _, err := d.Drain(context.Background()); err != nil {
						errs = append(errs, err)
					}
				}
				delivered := m.counts()
				recorded := count(t, bundle.pool, "SELECT count(*) FROM receipts")
				require.Equal(t, 4, recorded, "receipts recorded after three batches (deliveries per payment: %v; batch errors: %v)", delivered, errs)
				require.Equal(t, 1, count(t, bundle.pool, "SELECT count(*) FROM receipt_outbox WHERE payment_id = $1 AND attempts = 1", bundle.ids[2]),
					"the failing receipt is put off")
				for _, id := range bundle.ids {
					if id != bundle.ids[2] {
						require.Equal(t, 1, delivered[id], "payment %d mailed %d times", id, delivered[id])
					}
				}
			})
		}
	})

	// Defect: River recovered a panic in the receipt worker and retried the
	// job; the dispatcher ran the Deliverer bare, in app.Run's goroutine, so
	// one receipt that made the Deliverer panic (a template error on one
	// user's data) took the serve process down; and after a restart the same
	// receipt headed the outbox again, so every serve process crash-looped on
	// it and the payments API went down with them. A panicking Deliverer is
	// now a failed delivery, as a panicking resume is to the completer.
	t.Run("APanickingDeliveryNeverKillsTheDispatcher", func(t *testing.T) {
		t.Parallel()
		d, bundle := setup(t, 3)
		m := &mailer{panicOn: bundle.ids[0]}
		d.Deliverer, d.Config = m, workers.DispatcherConfig{
			Interval: 20 * time.Millisecond,
		}
		panicked := runDispatcher(d, 2*time.Second)
		require.Nil(t, panicked, "a Deliverer's panic escaped Dispatcher.Run, which app.Run runs in a bare goroutine: the process exits")
		require.Equal(t, 2, count(t, bundle.pool, "SELECT count(*) FROM receipts"), "the other receipts go out")
	})

	// A shutdown while a batch is delivering lets the batch commit; nothing is
	// mailed twice.
	t.Run("AShutdownMidBatchFinishesTheBatch", func(t *testing.T) {
		t.Parallel()
		d, bundle := setup(t, 5)
		m := &mailer{perDelivery: 50 * time.Millisecond}
		d.Deliverer = m
		ctx, shutdown := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); d.Run(ctx) }()
		time.Sleep(80 * time.Millisecond) // mid-batch
		shutdown()
		<-done
		require.Equal(t, len(bundle.ids), count(t, bundle.pool, "SELECT count(*) FROM receipts"))
		for _, id := range bundle.ids {
			require.Equal(t, 1, m.counts()[id])
		}
		d2 := &workers.Dispatcher{Pool: bundle.pool, Deliverer: m, Log: testutil.Logger(t)}
		n, err := d2.Drain(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)
	})
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
			INSERT INTO payments (user_id, amount, amount_captured, currency, payment_method, status)
			SELECT $1, 100 + i, 100 + i, 'usd', 'pm_card_visa', 'succeeded' FROM generate_series(1, $2) AS i
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

// recorder is a Deliverer that counts deliveries per payment, keeps the
// amount each last stated, and fails those in failing.
type recorder struct {
	mu        sync.Mutex
	delivered map[int64]int
	amounts   map[int64]int64
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
	if r.amounts == nil {
		r.amounts = map[int64]int64{}
	}
	r.amounts[rc.PaymentID] = rc.Amount
	return nil
}

func count(t *testing.T, pool *db.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// cancelling is a Deliverer whose process dies mid-batch.
type cancelling struct{ cancel context.CancelFunc }

func (c cancelling) Deliver(ctx context.Context, _ *workers.Receipt) error {
	c.cancel()
	return ctx.Err()
}

// mailer is a Deliverer standing in for an e-mail sender: each delivery
// takes perDelivery (honouring ctx, as a well-behaved SMTP client does),
// and the payment in hang does not answer until ctx ends. It counts the
// deliveries that returned success, per payment.
type mailer struct {
	perDelivery time.Duration
	hang        int64
	panicOn     int64
	failWith    map[int64]string // payment id: the error its delivery returns

	mu        sync.Mutex
	delivered map[int64]int
}

func (m *mailer) Deliver(ctx context.Context, r *workers.Receipt) error {
	if r.PaymentID == m.panicOn {
		panic(fmt.Sprintf("template error rendering receipt %d", r.PaymentID))
	}
	if msg, ok := m.failWith[r.PaymentID]; ok {
		return errors.New(msg)
	}
	if r.PaymentID == m.hang {
		<-ctx.Done()
		return fmt.Errorf("mail server did not answer: %w", ctx.Err())
	}
	if m.perDelivery > 0 {
		select {
		case <-time.After(m.perDelivery):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.delivered == nil {
		m.delivered = map[int64]int{}
	}
	m.delivered[r.PaymentID]++
	return nil
}

func (m *mailer) counts() map[int64]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int64]int, len(m.delivered))
	for k, v := range m.delivered {
		out[k] = v
	}
	return out
}

// runDispatcher runs d as app.Run does (Run in a goroutine of its own) for
// the given time, and returns what escaped Run, if anything.
func runDispatcher(d *workers.Dispatcher, runFor time.Duration) (panicked any) {
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { panicked = recover() }()
		d.Run(ctx)
	}()
	<-done
	return panicked
}

// oldReceiptArgs is the River job the previous version (before 3e44399)
// inserted in the transaction that finished a payment
// (workers.ReceiptEnqueuer: client.InsertTx(ctx, tx, ReceiptArgs{...})).
type oldReceiptArgs struct {
	PaymentID int64 `json:"payment_id"`
}

func (oldReceiptArgs) Kind() string { return "receipt" }
