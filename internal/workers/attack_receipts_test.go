package workers_test

// Attacks on the receipt outbox (commit 3e44399): what a payments engineer
// would try against Dispatcher.Run/Drain and the migration off River.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

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

// TestAttackSlowDeliveriesNeverCommitABatch: BatchTimeout bounds the whole
// batch, but the batch delivers its receipts one after another. When the
// deliveries of one batch take longer together than BatchTimeout (with the
// defaults: 100 receipts at more than 150 ms each, an ordinary SMTP round
// trip), every batch is cut short and rolled back after it delivered most
// of its receipts: nothing is ever recorded, the same receipts are mailed
// again every BatchTimeout, forever, and the outbox only grows.
//
// Scaled down here: 10 receipts a batch, 60 ms a delivery, a 400 ms batch
// timeout. Every delivery succeeds.
func TestAttackSlowDeliveriesNeverCommitABatch(t *testing.T) {
	t.Parallel()
	pool, ids := outbox(t, 10)
	m := &mailer{perDelivery: 60 * time.Millisecond}
	d := &workers.Dispatcher{Pool: pool, Deliverer: m, Log: testutil.Logger(t), Config: workers.DispatcherConfig{
		BatchSize: 10, BatchTimeout: 400 * time.Millisecond, Interval: 20 * time.Millisecond,
	}}
	require.Nil(t, runDispatcher(d, 3*time.Second))

	delivered := m.counts()
	t.Logf("deliveries per payment after 3s: %v", delivered)
	recorded := count(t, pool, "SELECT count(*) FROM receipts")
	require.Equal(t, len(ids), recorded,
		"every delivery succeeded, yet %d of %d receipts are recorded and %d are still in the outbox; deliveries per payment: %v",
		recorded, len(ids), count(t, pool, "SELECT count(*) FROM receipt_outbox"), delivered)
	for _, id := range ids {
		require.Equal(t, 1, delivered[id], "payment %d mailed %d times", id, delivered[id])
	}
}

// TestAttackOneHangingDeliveryStallsTheOutbox: one receipt whose delivery
// hangs (a mail server that accepts the connection and never answers) cuts
// its batch short at BatchTimeout. The rollback forgets that its delivery
// failed (no attempt counted, run_at not moved), so the same receipt heads
// the next batch, which hangs again: the receipts before it in the batch
// are mailed again every BatchTimeout, the ones after it (and every receipt
// enqueued later) never go out, and nothing is recorded, ever.
func TestAttackOneHangingDeliveryStallsTheOutbox(t *testing.T) {
	t.Parallel()
	pool, ids := outbox(t, 5)
	m := &mailer{hang: ids[2]}
	d := &workers.Dispatcher{Pool: pool, Deliverer: m, Log: testutil.Logger(t), Config: workers.DispatcherConfig{
		BatchTimeout: 300 * time.Millisecond, Interval: 20 * time.Millisecond,
	}}
	require.Nil(t, runDispatcher(d, 3*time.Second))

	delivered := m.counts()
	t.Logf("deliveries per payment after 3s: %v (payment %d hangs)", delivered, ids[2])
	var attempts int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT attempts FROM receipt_outbox WHERE payment_id = $1", ids[2]).Scan(&attempts))
	var missing []int64
	for _, id := range ids {
		if id != ids[2] && count(t, pool, "SELECT count(*) FROM receipts WHERE payment_id = $1", id) == 0 {
			missing = append(missing, id)
		}
	}
	require.Empty(t, missing, "receipts not recorded behind the hanging one; deliveries per payment: %v; the hanging receipt's attempts: %d", delivered, attempts)
	require.Positive(t, attempts, "the hanging delivery was never counted as failed, so it is never put off")
	for _, id := range ids {
		if id != ids[2] {
			require.Equal(t, 1, delivered[id], "payment %d mailed %d times", id, delivered[id])
		}
	}
}

// TestAttackANonUTF8DeliveryErrorPoisonsTheOutbox: a failed delivery is put
// off by writing its error to receipt_outbox.last_error, a text column. The
// message is made valid UTF-8 only when it is longer than 1000 bytes; a
// short one goes to Postgres as it is. A mail server that answers in
// Latin-1 ("550 Empfänger unbekannt", 0xE4 for the ä) or with a NUL byte
// makes that UPDATE fail, which fails the whole batch: the receipts
// delivered before it in the batch are rolled back (and mailed again with
// the next batch), the failing one is not put off, and so every batch from
// then on meets it again. Nothing is recorded as long as that receipt is
// in the outbox.
func TestAttackANonUTF8DeliveryErrorPoisonsTheOutbox(t *testing.T) {
	t.Parallel()
	for name, msg := range map[string]string{
		"latin-1": "550 5.1.1 Empf\xe4nger unbekannt",
		"NUL":     "550 mailbox unavailable\x00",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pool, ids := outbox(t, 5)
			m := &mailer{failWith: map[int64]string{ids[2]: msg}}
			d := &workers.Dispatcher{Pool: pool, Deliverer: m, Log: testutil.Logger(t)}
			var errs []error
			for range 3 {
				if _, err := d.Drain(context.Background()); err != nil {
					errs = append(errs, err)
				}
			}
			delivered := m.counts()
			recorded := count(t, pool, "SELECT count(*) FROM receipts")
			require.Equal(t, 4, recorded, "receipts recorded after three batches (deliveries per payment: %v; batch errors: %v)", delivered, errs)
			require.Equal(t, 1, count(t, pool, "SELECT count(*) FROM receipt_outbox WHERE payment_id = $1 AND attempts = 1", ids[2]),
				"the failing receipt is put off")
			for _, id := range ids {
				if id != ids[2] {
					require.Equal(t, 1, delivered[id], "payment %d mailed %d times", id, delivered[id])
				}
			}
		})
	}
}

// TestAttackAPanickingDeliveryKillsTheDispatcher: River recovered a panic
// in the receipt worker and retried the job; the dispatcher runs the
// Deliverer bare, in app.Run's goroutine, so one receipt that makes the
// Deliverer panic (a template error on one user's data) takes the serve
// process down; and after a restart the same receipt heads the outbox
// again, so every serve process crash-loops on it and the payments API
// goes down with them. The completer recovers its panics for that reason.
func TestAttackAPanickingDeliveryKillsTheDispatcher(t *testing.T) {
	t.Parallel()
	pool, ids := outbox(t, 3)
	m := &mailer{panicOn: ids[0]}
	d := &workers.Dispatcher{Pool: pool, Deliverer: m, Log: testutil.Logger(t), Config: workers.DispatcherConfig{
		Interval: 20 * time.Millisecond,
	}}
	panicked := runDispatcher(d, 2*time.Second)
	require.Nil(t, panicked, "a Deliverer's panic escaped Dispatcher.Run, which app.Run runs in a bare goroutine: the process exits")
	require.Equal(t, 2, count(t, pool, "SELECT count(*) FROM receipts"), "the other receipts go out")
}

// oldReceiptArgs is the River job the previous version (before 3e44399)
// inserted in the transaction that finished a payment
// (workers.ReceiptEnqueuer: client.InsertTx(ctx, tx, ReceiptArgs{...})).
type oldReceiptArgs struct {
	PaymentID int64 `json:"payment_id"`
}

func (oldReceiptArgs) Kind() string { return "receipt" }

// TestAttackAReceiptJobOfThePreviousVersionIsNeverDelivered: migration
// 00015 moves the receipt jobs that exist when it runs, and says a process
// of the previous version may still be running then. Such a process keeps
// taking payments and enqueues their receipts as River jobs, after the
// move. No process of the new version has a worker for them: its River
// client fetches them and fails them as an unknown kind (and its leader's
// rescuer discards them), nothing moves them to the outbox, and once the
// old processes are gone those receipts are never delivered.
func TestAttackAReceiptJobOfThePreviousVersionIsNeverDelivered(t *testing.T) {
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

// TestAttackTwoServeProcessesDeliverEachReceiptOnce held: two serve
// processes on one database, payments through both, each delivered once
// (counted at the Deliverer) and recorded once.
func TestAttackTwoServeProcessesDeliverEachReceiptOnce(t *testing.T) {
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

// TestAttackShutdownMidBatchFinishesTheBatch held: a shutdown while a
// batch is delivering lets the batch commit; nothing is mailed twice.
func TestAttackShutdownMidBatchFinishesTheBatch(t *testing.T) {
	t.Parallel()
	pool, ids := outbox(t, 5)
	m := &mailer{perDelivery: 50 * time.Millisecond}
	d := &workers.Dispatcher{Pool: pool, Deliverer: m, Log: testutil.Logger(t)}
	ctx, shutdown := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	time.Sleep(80 * time.Millisecond) // mid-batch
	shutdown()
	<-done
	require.Equal(t, len(ids), count(t, pool, "SELECT count(*) FROM receipts"))
	for _, id := range ids {
		require.Equal(t, 1, m.counts()[id])
	}
	d2 := &workers.Dispatcher{Pool: pool, Deliverer: m, Log: testutil.Logger(t)}
	n, err := d2.Drain(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
}
