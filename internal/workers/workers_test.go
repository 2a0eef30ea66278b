package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

const visa = `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa"}`

var errCrash = errors.New("injected crash")

// crashing returns hooks that crash every run at point while *on is true.
func crashing(point phases.RecoveryPoint, afterCall bool, on *atomic.Bool) phases.Hooks {
	hook := func(_ context.Context, at phases.RecoveryPoint) error {
		if at == point && on.Load() {
			return errCrash
		}
		return nil
	}
	if afterCall {
		return phases.Hooks{AfterCall: hook}
	}
	return phases.Hooks{AfterCommit: hook}
}

type testBundle struct {
	svc       *testutil.Service
	apiKey    string
	completer *workers.CompleterWorker
}

func setup(t *testing.T, opts testutil.ServiceOptions) *testBundle {
	t.Helper()
	// The periodic completer of the service itself runs rarely here (once
	// on start); tests run the worker directly, which waits for any other
	// run to end first. So does its reaper, which waits for no one: a test
	// of it waits for that run first (reaperRan).
	opts.Workers.Completer.Interval = time.Hour
	opts.Workers.Reaper.Interval = time.Hour
	svc := testutil.StartService(t, opts)
	_, apiKey := svc.NewUser(t)
	return &testBundle{
		svc:    svc,
		apiKey: apiKey,
		completer: &workers.CompleterWorker{
			Pool:   svc.Pool,
			Engine: svc.App.Engine,
			Config: workers.CompleterConfig{MinIdle: time.Millisecond, Backoff: time.Millisecond},
			Log:    testutil.Logger(t),
		},
	}
}

// later makes the bundle's completer judge leases d on: the crashed runs'
// leases are stale to it at once, with no sleep.
func (b *testBundle) later(d time.Duration) {
	b.completer.Engine = b.svc.App.EngineAt(func() time.Time { return time.Now().Add(d) })
}

// setupCrashed starts a service whose runs crash at point (after its commit,
// or after its call when afterCall), sends each key once so that it is left
// abandoned there, and stops the crashes.
func setupCrashed(t *testing.T, opts testutil.ServiceOptions, point phases.RecoveryPoint, afterCall bool, keys ...string) *testBundle {
	t.Helper()
	var on atomic.Bool
	on.Store(true)
	opts.Hooks = crashing(point, afterCall, &on)
	b := setup(t, opts)
	for _, k := range keys {
		require.Equal(t, http.StatusInternalServerError, b.svc.PostPayment(t, b.apiKey, k, visa).Status)
	}
	on.Store(false)
	return b
}

func (b *testBundle) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	_, err := b.svc.Pool.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
}

func (b *testBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.svc.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// reaperRan waits until the service's own reaper has finished the run it
// makes on start, which River's leader election can delay by seconds: keys
// a test ages before then could be reaped by that run, or locked by it and
// skipped by the worker the test runs.
func (b *testBundle) reaperRan(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		err := b.svc.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM river_job WHERE kind = 'reaper' AND state = 'completed'").Scan(&n)
		return err == nil && n > 0
	}, 30*time.Second, 20*time.Millisecond, "the service's reaper never ran on start")
}

// lazy formats as what f returns when it is formatted: for a message
// that should show the state at a deadline, not at the start of the wait.
type lazy func() any

func (l lazy) String() string { return fmt.Sprint(l()) }

// jobs describes every River job: kind, state and errors.
func (b *testBundle) jobs(t *testing.T) []string {
	rows, err := b.svc.Pool.Query(context.Background(), "SELECT kind || ' ' || state || ' ' || errors::text FROM river_job")
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s *string
		require.NoError(t, rows.Scan(&s))
		if s != nil {
			out = append(out, *s)
		}
	}
	return out
}

// finishedStatus is the stored response status of key, or 0 if unfinished.
func (b *testBundle) finishedStatus(t *testing.T, key string) int {
	t.Helper()
	var status *int
	require.NoError(t, b.svc.Pool.QueryRow(context.Background(),
		"SELECT response_code FROM idempotency_keys WHERE idempotency_key = $1", key).Scan(&status))
	if status == nil {
		return 0
	}
	return *status
}

func TestCompleterResumesFromEachRecoveryPoint(t *testing.T) {
	t.Parallel()
	const lease = 200 * time.Millisecond

	t.Run("payment_created, lease held by a crashed run", func(t *testing.T) {
		t.Parallel()
		b := setupCrashed(t, testutil.ServiceOptions{LeaseTimeout: lease}, payments.PaymentCreated, false, "k")
		b.later(time.Hour)

		n, err := b.completer.RunOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Equal(t, http.StatusCreated, b.finishedStatus(t, "k"))
		require.Len(t, b.svc.Stripe.PaymentIntents(), 1)
	})

	t.Run("payment_created, charge made but not recorded", func(t *testing.T) {
		t.Parallel()
		b := setupCrashed(t, testutil.ServiceOptions{LeaseTimeout: lease}, payments.PaymentCreated, true, "k")
		b.later(time.Hour)

		_, err := b.completer.RunOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, b.finishedStatus(t, "k"))
		require.Len(t, b.svc.Stripe.PaymentIntents(), 1, "the resume replays the Stripe key; no second PaymentIntent")
		// The client's retry gets the response the completer stored.
		resp := b.svc.PostPayment(t, b.apiKey, "k", visa)
		require.Equal(t, http.StatusCreated, resp.Status)
		require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	})

	t.Run("started, nothing done yet", func(t *testing.T) {
		t.Parallel()
		b := setupCrashed(t, testutil.ServiceOptions{LeaseTimeout: lease}, payments.PaymentCreated, false, "k")
		// Rewind the key to 'started', as a flow whose first step committed
		// only the reservation would leave it.
		b.exec(t, "DELETE FROM audit_records")
		b.exec(t, "DELETE FROM payments")
		b.exec(t, "UPDATE idempotency_keys SET recovery_point = 'started', lock_token = NULL, locked_by = NULL, locked_at = NULL")

		_, err := b.completer.RunOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, b.finishedStatus(t, "k"))
		require.Equal(t, 1, b.count(t, "SELECT count(*) FROM payments WHERE status = 'succeeded'"))
		require.Len(t, b.svc.Stripe.PaymentIntents(), 1)
	})

	t.Run("charge_created, only the finish left", func(t *testing.T) {
		t.Parallel()
		b := setupCrashed(t, testutil.ServiceOptions{LeaseTimeout: lease}, phases.Finished, false, "k")
		// Rewind the finished key to 'charge_created', as a flow that
		// committed the charge's record alone would leave it.
		b.exec(t, `UPDATE idempotency_keys SET recovery_point = 'charge_created', response_code = NULL,
			response_headers = NULL, response_body = NULL, finished_at = NULL`)

		_, err := b.completer.RunOnce(context.Background())
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, b.finishedStatus(t, "k"))
		require.EqualValues(t, 1, b.svc.Stripe.Stats().CreateRequests, "finishing needs no Stripe call")
	})
}

func TestCompleterTakesOverDeadInstanceAtOnce(t *testing.T) {
	t.Parallel()
	// The default 90s lease: only the instance's death frees the key early.
	b := setupCrashed(t, testutil.ServiceOptions{}, payments.PaymentCreated, false, "k")

	n, err := b.completer.RunOnce(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "a live instance's lease is respected")

	// The instance that held the lease dies: its heartbeats stop.
	b.exec(t, "UPDATE instances SET heartbeat_at = now() - interval '1 hour'")
	n, err = b.completer.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, http.StatusCreated, b.finishedStatus(t, "k"))
}

func TestTwoCompletersNeverRunOneKeyAtOnce(t *testing.T) {
	t.Parallel()
	const keys = 20
	// A lease long enough that no run outlives it on a loaded machine: a
	// takeover here would be by design, and would muddy the count below.
	const lease = 3 * time.Second
	var names []string
	for i := range keys {
		names = append(names, fmt.Sprintf("k%d", i))
	}
	b := setupCrashed(t, testutil.ServiceOptions{LeaseTimeout: lease}, payments.PaymentCreated, false, names...)
	time.Sleep(lease + 100*time.Millisecond)
	// Every charge is slow, so overlapping runs of one key would meet at
	// Stripe as a 409 on its idempotency key.
	b.svc.Stripe.SetChaos(stripefake.Chaos{Latency: 50 * time.Millisecond, MaxLatency: 50 * time.Millisecond})

	// The completer's lease makes the second run wait for the first (see
	// TestCompleterRunsOneAtATime); each key's lease would keep them apart
	// without it.
	other := *b.completer
	var runs []func() int
	for _, c := range []*workers.CompleterWorker{b.completer, &other} {
		runs = append(runs, testutil.Go(t, func(t testing.TB) int {
			n, err := c.RunOnce(context.Background())
			require.NoError(t, err)
			return n
		}))
	}
	for _, wait := range runs {
		wait()
	}

	require.Equal(t, keys, b.count(t, "SELECT count(*) FROM idempotency_keys WHERE response_code = 201"))
	require.Len(t, b.svc.Stripe.PaymentIntents(), keys)
	require.EqualValues(t, keys, b.svc.Stripe.Stats().CreateRequests, "each key was charged by exactly one run")
	require.Zero(t, b.svc.Stripe.Stats().KeyInUse)
}

func TestReaperSparesUnfinishedKeysAndKeepsPayments(t *testing.T) {
	t.Parallel()
	b := setup(t, testutil.ServiceOptions{LeaseTimeout: 200 * time.Millisecond})
	for i := range 5 {
		require.Equal(t, http.StatusCreated, b.svc.PostPayment(t, b.apiKey, fmt.Sprintf("old%d", i), visa).Status)
	}
	require.Equal(t, http.StatusCreated, b.svc.PostPayment(t, b.apiKey, "recent", visa).Status)
	b.svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500})
	require.Equal(t, http.StatusServiceUnavailable, b.svc.PostPayment(t, b.apiKey, "unfinished", visa).Status)
	b.reaperRan(t)
	b.exec(t, "UPDATE idempotency_keys SET created_at = now() - interval '3 days', finished_at = now() - interval '2 days' WHERE idempotency_key LIKE 'old%'")
	b.exec(t, "UPDATE idempotency_keys SET created_at = now() - interval '3 days' WHERE idempotency_key = 'unfinished'")

	reaper := &workers.ReaperWorker{Pool: b.svc.Pool, Config: workers.ReaperConfig{Retention: 24 * time.Hour, BatchSize: 2}, Log: testutil.Logger(t)}
	reaped, err := reaper.RunOnce(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 5, reaped, "in batches of 2")

	require.Equal(t, 0, b.count(t, "SELECT count(*) FROM idempotency_keys WHERE idempotency_key LIKE 'old%'"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM idempotency_keys WHERE idempotency_key = 'recent'"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM idempotency_keys WHERE idempotency_key = 'unfinished'"))
	require.Equal(t, 7, b.count(t, "SELECT count(*) FROM payments"))
	require.Equal(t, 5, b.count(t, "SELECT count(*) FROM payments WHERE idempotency_key_id IS NULL"))
	require.Equal(t, 7, b.count(t, "SELECT count(DISTINCT resource_id) FROM audit_records"))

	// Each reaped key left a tombstone naming the payment it made.
	require.Equal(t, 5, b.count(t, `SELECT count(*) FROM idempotency_key_tombstones t
		JOIN payments p ON p.id = t.resource_id AND p.user_id = t.user_id
		WHERE t.idempotency_key LIKE 'old%' AND t.resource_type = 'payment' AND t.response_code = 201
		  AND t.request_method = 'POST' AND t.request_path = '/payments' AND t.finished_at < now() - interval '1 day'`))
	require.Equal(t, 5, b.count(t, "SELECT count(*) FROM idempotency_key_tombstones"))

	// A late retry with a reaped key is refused, and charges nothing.
	creates := b.svc.Stripe.Stats().CreateRequests
	resp := b.svc.PostPayment(t, b.apiKey, "old0", visa)
	require.Equal(t, http.StatusUnprocessableEntity, resp.Status, "body: %s", resp.Body)
	require.Contains(t, string(resp.Body), "idempotency-key-expired")
	require.Equal(t, creates, b.svc.Stripe.Stats().CreateRequests)
	require.Equal(t, 7, b.count(t, "SELECT count(*) FROM payments"))
}

func TestReaperDeletesExpiredTombstones(t *testing.T) {
	t.Parallel()
	b := setup(t, testutil.ServiceOptions{})
	for i := range 5 {
		require.Equal(t, http.StatusCreated, b.svc.PostPayment(t, b.apiKey, fmt.Sprintf("k%d", i), visa).Status)
	}
	b.reaperRan(t)
	b.exec(t, "UPDATE idempotency_keys SET finished_at = now() - interval '2 days'")
	reaper := &workers.ReaperWorker{Pool: b.svc.Pool, Config: workers.ReaperConfig{BatchSize: 2}, Log: testutil.Logger(t)}
	reaped, err := reaper.RunOnce(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, 5, reaped)

	// Four tombstones outlive the default retention, one does not.
	b.exec(t, "UPDATE idempotency_key_tombstones SET reaped_at = now() - $1::interval WHERE idempotency_key <> 'k4'",
		(workers.TombstoneRetentionDefault + time.Hour).String())
	_, err = reaper.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM idempotency_key_tombstones WHERE idempotency_key = 'k4'"))
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM idempotency_key_tombstones"), "deleted in batches of 2")

	// The key whose tombstone is left is still refused. (One whose
	// tombstone is gone is a new key again; the emulator, unlike Stripe,
	// never forgets its idempotency keys, so that is not sent here.)
	require.Equal(t, http.StatusUnprocessableEntity, b.svc.PostPayment(t, b.apiKey, "k4", visa).Status)
}

func TestReconciliationAdoptsAndNeverCreatesASecond(t *testing.T) {
	t.Parallel()
	// Charged at Stripe, unrecorded, and left past Stripe's idempotency
	// window, where re-sending the Stripe key could charge again. The
	// lease is long and Stripe calls time out after a second, so the create
	// hung below usually outlasts the reconciliation (either order ends
	// the same).
	b := setupCrashed(t, testutil.ServiceOptions{StripeTimeout: time.Second}, payments.PaymentCreated, true, "charged")
	// Never charged: its create is held at Stripe before anything is made
	// and never released, so it is abandoned when its call times out, as
	// if its process had died before the Stripe call.
	b.svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultHang})
	hung := testutil.Go(t, func(t testing.TB) *testutil.Response {
		return b.svc.PostPayment(t, b.apiKey, "never-charged", visa)
	})
	testutil.WaitFor(t, 5*time.Second, 10*time.Millisecond, func() bool { return b.svc.Stripe.Stats().Hangs == 1 })
	b.exec(t, "UPDATE idempotency_keys SET created_at = now() - interval '25 hours', lock_token = NULL, locked_by = NULL, locked_at = NULL")
	createsBefore := b.svc.Stripe.Stats().CreateRequests

	_, err := b.completer.RunOnce(context.Background())
	require.NoError(t, err)

	require.Equal(t, http.StatusCreated, b.finishedStatus(t, "charged"), "adopted the PaymentIntent found by metadata")
	require.Equal(t, createsBefore, b.svc.Stripe.Stats().CreateRequests, "reconciliation only looks up")
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM payments WHERE status = 'succeeded' AND stripe_payment_intent_id IS NOT NULL"))

	// The key that was never charged is settled as such: a stored 400
	// payment-rejected whose processor_code is not_charged, its payment
	// failed.
	requireNotCharged := func() {
		t.Helper()
		var (
			status int
			body   []byte
		)
		require.NoError(t, b.svc.Pool.QueryRow(context.Background(),
			"SELECT response_code, response_body FROM idempotency_keys WHERE idempotency_key = 'never-charged'").Scan(&status, &body))
		require.Equal(t, http.StatusBadRequest, status, "body: %s", body)
		var rejected struct {
			Type          string `json:"type"`
			ProcessorCode string `json:"processor_code"`
		}
		require.NoError(t, json.Unmarshal(body, &rejected), "body: %s", body)
		require.Equal(t, "https://paymentsd.dev/problems/payment-rejected", rejected.Type)
		require.Equal(t, "not_charged", rejected.ProcessorCode)
		require.Equal(t, 1, b.count(t, `SELECT count(*) FROM payments p JOIN idempotency_keys k ON k.id = p.idempotency_key_id
			WHERE k.idempotency_key = 'never-charged' AND p.status = 'failed' AND p.failure_code = 'not_charged'
			  AND p.stripe_payment_intent_id IS NULL`))
	}
	requireNotCharged()

	// The hung create gives up without creating anything, and its run,
	// whose lease is gone, changes nothing: its client is told to retry,
	// the retry gets the stored 400, and the one PaymentIntent is the
	// charged key's.
	late := hung()
	require.Equal(t, http.StatusServiceUnavailable, late.Status, "body: %s", late.Body)
	requireNotCharged()
	retry := b.svc.PostPayment(t, b.apiKey, "never-charged", visa)
	require.Equal(t, http.StatusBadRequest, retry.Status, "body: %s", retry.Body)
	require.Equal(t, "true", retry.Header.Get("Idempotent-Replayed"))
	pis := b.svc.Stripe.PaymentIntents()
	require.Len(t, pis, 1, "no PaymentIntent for the key that was never charged")
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM payments p JOIN idempotency_keys k ON k.id = p.idempotency_key_id
		WHERE k.idempotency_key = 'charged' AND p.stripe_payment_intent_id = $1`, pis[0].ID))
}
