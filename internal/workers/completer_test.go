package workers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// outcomes collects what a completer observes.
type outcomes struct {
	mu   sync.Mutex
	seen []string
}

func (o *outcomes) observe(outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, outcome)
}

func (o *outcomes) list() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen...)
}

// syncBuffer is a log sink written from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

func TestCompleterSurvivesAPanickingResume(t *testing.T) {
	t.Parallel()
	// Each resume must end within the lease less its margin (KeyTimeout):
	// at 200 ms a loaded CI machine once ran the good key past it.
	const lease = 2 * time.Second
	b := setupCrashed(t, testutil.ServiceOptions{LeaseTimeout: lease}, payments.PaymentCreated, false, "boom", "fine")
	b.later(time.Hour)
	var boomID int64
	require.NoError(t, b.svc.Pool.QueryRow(context.Background(), "SELECT id FROM idempotency_keys WHERE idempotency_key = 'boom'").Scan(&boomID))

	var seen outcomes
	logs := &syncBuffer{}
	b.completer.Observe = seen.observe
	b.completer.Log = zerolog.New(logs)
	workers.SetResumeKey(b.completer, func(ctx context.Context, id int64) (*phases.Result, error) {
		if id == boomID {
			panic("injected panic")
		}
		return b.completer.Engine.Resume(ctx, id)
	})

	n, err := b.completer.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.ElementsMatch(t, []string{workers.ResumePanic, workers.ResumeFinished}, seen.list(), "completer's log: %v", logs.lines())
	require.Equal(t, http.StatusCreated, b.finishedStatus(t, "fine"), "the other key of the batch finished")
	require.Zero(t, b.finishedStatus(t, "boom"), "the panicking key is left for a later run")

	var logged bool
	for _, line := range logs.lines() {
		if line["message"] == "completer: resume panicked" {
			logged = true
			require.Equal(t, "injected panic", line["panic"])
			require.EqualValues(t, boomID, line["idempotency_key_id"])
			require.Contains(t, line["stack"], "completer.go")
		}
	}
	require.True(t, logged, "the panic is logged")

	// The process lives on, and so does the key: the next run finishes it.
	workers.SetResumeKey(b.completer, nil)
	_, err = b.completer.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, b.finishedStatus(t, "boom"))
}

func TestCompleterRunsOneAtATime(t *testing.T) {
	t.Parallel()
	// Long enough for a blocked resume to outlast the wait below within
	// its key's lease.
	const lease = time.Second
	b := setupCrashed(t, testutil.ServiceOptions{LeaseTimeout: lease}, payments.PaymentCreated, false, "k1", "k2")
	time.Sleep(lease + 50*time.Millisecond)
	ctx := context.Background()

	// Each run blocks inside its first resume until released; a second
	// completer stands for another process (its own lease holder).
	var (
		running, most atomic.Int32
		started       = make(chan struct{}, 2)
		release       = make(chan struct{})
	)
	blocking := func(ctx context.Context, id int64) (*phases.Result, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		started <- struct{}{}
		<-release
		return b.completer.Engine.Resume(ctx, id)
	}
	var runs []func() int
	for range 2 {
		c := *b.completer
		c.Config.Concurrency = 1
		workers.SetResumeKey(&c, blocking)
		runs = append(runs, testutil.Go(t, func(t testing.TB) int {
			n, err := c.RunOnce(ctx)
			require.NoError(t, err)
			return n
		}))
	}
	<-started

	// One run holds the lease and is inside a resume; the other waits for
	// the lease and has not resumed anything.
	leases := func() int {
		var n int
		require.NoError(t, b.svc.Pool.QueryRow(ctx, "SELECT count(*) FROM worker_leases WHERE name = $1",
			workers.CompleterLease).Scan(&n))
		return n
	}
	require.Equal(t, 1, leases())
	time.Sleep(300 * time.Millisecond) // the waiting run tries the lease every 100ms meanwhile
	require.EqualValues(t, 1, running.Load())

	close(release)
	require.ElementsMatch(t, []int{2, 0}, []int{runs[0](), runs[1]()}, "the first run did both keys; the second, after it, found none")
	require.EqualValues(t, 1, most.Load(), "never two resumes at once")
	require.Equal(t, http.StatusCreated, b.finishedStatus(t, "k1"))
	require.Equal(t, http.StatusCreated, b.finishedStatus(t, "k2"))
	testutil.WaitForf(t, 5*time.Second, 10*time.Millisecond, func() bool { return leases() == 0 },
		"every run released the lease")
}

// Behind PgBouncer in transaction pooling mode a client's statements run on
// whichever server connection is free, and a server connection ends, or
// serves another client, between transactions: a run must keep the others
// out regardless. Here every connection to the database ends while a run
// is inside a resume, and a second completer (another process, with a pool
// of its own) still waits for it. A session-level advisory lock let the
// second run start at once.
func TestCompleterRunOutlivesItsConnections(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	b := setupCrashed(t, testutil.ServiceOptions{LeaseTimeout: lease}, payments.PaymentCreated, false, "k1", "k2")
	time.Sleep(lease + 50*time.Millisecond)
	ctx := context.Background()

	var running, most atomic.Int32
	inside, release := make(chan struct{}, 2), make(chan struct{})
	blocking := func(engine *phases.Engine) func(ctx context.Context, id int64) (*phases.Result, error) {
		return func(ctx context.Context, id int64) (*phases.Result, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			inside <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return engine.Resume(ctx, id)
		}
	}
	first := *b.completer
	first.Config.Concurrency = 1
	workers.SetResumeKey(&first, blocking(first.Engine))
	wait := testutil.Go(t, func(t testing.TB) int {
		n, err := first.RunOnce(ctx)
		require.NoError(t, err)
		return n
	})
	<-inside

	b.exec(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	second := *b.completer
	second.Pool = testutil.ConnectConfig(t, b.svc.Pool.Driver().Config().Copy())
	workers.SetResumeKey(&second, blocking(second.Engine))
	waitCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	n, err := second.RunOnce(waitCtx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the second run waits for the first")
	require.Zero(t, n)
	require.EqualValues(t, 1, most.Load(), "never two resumes at once")

	close(release)
	require.Equal(t, 2, wait())
}

func TestPeriodicJobsDoNotPileUp(t *testing.T) {
	t.Parallel()
	b := setupService(t, testutil.ServiceOptions{})
	ctx := context.Background()
	tx, err := b.svc.Pool.Driver().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()

	// As River's periodic enqueuer inserts them, in one transaction so
	// that no worker gets to the first one meanwhile.
	for _, args := range []interface{ Kind() string }{workers.CompleterArgs{}, workers.ReaperArgs{}} {
		first, err := b.svc.App.River.InsertTx(ctx, tx, args, workers.PeriodicInsertOpts())
		require.NoError(t, err)
		require.False(t, first.UniqueSkippedAsDuplicate)
		again, err := b.svc.App.River.InsertTx(ctx, tx, args, workers.PeriodicInsertOpts())
		require.NoError(t, err)
		require.True(t, again.UniqueSkippedAsDuplicate, "%s: a second job while one waits", args.Kind())
		require.Equal(t, first.Job.ID, again.Job.ID)
	}
	require.Equal(t, 1, workers.PeriodicInsertOpts().MaxAttempts, "a failed run is not retried: the next period runs it")
}

func TestCompleterTimeoutsAreConsistent(t *testing.T) {
	t.Parallel()
	completer := func(lease time.Duration, cfg workers.CompleterConfig) *workers.CompleterWorker {
		return &workers.CompleterWorker{Engine: phases.New(nil, phases.Config{LeaseTimeout: lease}), Config: cfg}
	}

	t.Run("defaults", func(t *testing.T) {
		t.Parallel()
		c := completer(90*time.Second, workers.CompleterConfig{})
		require.Equal(t, 81*time.Second, c.KeyTimeout(), "a resume ends before its lease could be taken over")
		require.Equal(t, 162*time.Second, c.RunTimeout())
		require.Equal(t, 192*time.Second, c.Timeout(nil))
	})

	t.Run("a configured key timeout only shortens", func(t *testing.T) {
		t.Parallel()
		require.Equal(t, 10*time.Second, completer(90*time.Second, workers.CompleterConfig{KeyTimeout: 10 * time.Second}).KeyTimeout())
		require.Equal(t, 81*time.Second, completer(90*time.Second, workers.CompleterConfig{KeyTimeout: time.Hour}).KeyTimeout())
	})

	t.Run("a run has room for a key", func(t *testing.T) {
		t.Parallel()
		c := completer(90*time.Second, workers.CompleterConfig{RunTimeout: time.Second})
		require.Equal(t, 90*time.Second, c.RunTimeout(), "a key timeout and the lease margin")
	})

	for _, lease := range []time.Duration{200 * time.Millisecond, time.Second, 90 * time.Second, 10 * time.Minute} {
		for _, cfg := range []workers.CompleterConfig{{}, {KeyTimeout: time.Second}, {RunTimeout: time.Hour}, {RunTimeout: time.Millisecond}} {
			c := completer(lease, cfg)
			require.Less(t, c.KeyTimeout(), lease, "lease %s, %+v", lease, cfg)
			require.Less(t, c.KeyTimeout(), c.RunTimeout(), "lease %s, %+v", lease, cfg)
			// River cancels a job at its timeout and rescues it no earlier:
			// the run must have ended on its own by then.
			require.Less(t, c.RunTimeout(), c.Timeout(nil), "lease %s, %+v", lease, cfg)
			require.GreaterOrEqual(t, workers.RescueStuckJobsAfter, workers.JobTimeout)
		}
	}
}

func TestCompleterStartsNoKeyItCannotFinishInTime(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	b := setupCrashed(t, testutil.ServiceOptions{LeaseTimeout: lease}, payments.PaymentCreated, false, "k1", "k2", "k3")
	time.Sleep(lease + 50*time.Millisecond)

	var calls atomic.Int32
	c := *b.completer
	c.Config = workers.CompleterConfig{MinIdle: time.Millisecond, Backoff: time.Millisecond, Concurrency: 1, RunTimeout: time.Millisecond}
	workers.SetResumeKey(&c, func(ctx context.Context, id int64) (*phases.Result, error) {
		calls.Add(1)
		time.Sleep(c.RunTimeout() - c.KeyTimeout() + 50*time.Millisecond)
		return b.completer.Engine.Resume(ctx, id)
	})
	start := time.Now()
	require.NoError(t, c.Work(context.Background(), nil))
	require.Less(t, time.Since(start), c.Timeout(nil))
	require.EqualValues(t, 1, calls.Load(), "after the first key, none could end within the run")
	require.Equal(t, 1, b.count(t, "SELECT count(*) FROM idempotency_keys WHERE response_code = 201"))
}

func TestCompleterLogsThroughTheContext(t *testing.T) {
	t.Parallel()
	const lease = 200 * time.Millisecond
	b := setupCrashed(t, testutil.ServiceOptions{LeaseTimeout: lease}, payments.PaymentCreated, false, "k")
	b.later(time.Hour)
	logs := &syncBuffer{}
	b.completer.Log = zerolog.New(logs).Level(zerolog.DebugLevel)

	// The lease is 200 ms, so that the crashed run's is stale at once; a
	// run that a loaded machine stalls longer than that loses it, is
	// fenced, and leaves the key to the next run (CI saw it once).
	testutil.WaitForf(t, 10*time.Second, 10*time.Millisecond, func() bool {
		_, err := b.completer.RunOnce(context.Background())
		require.NoError(t, err)
		return b.finishedStatus(t, "k") == http.StatusCreated
	}, "the completer never finished the key")

	// The engine's own lines (zerolog.Ctx) carry the run's fields.
	var engineLines int
	for _, line := range logs.lines() {
		if line["message"] == "phase committed" {
			engineLines++
			require.Equal(t, "completer", line["job"])
			require.NotNil(t, line["idempotency_key_id"])
		}
	}
	require.Positive(t, engineLines, "logs: %v", logs.lines())
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
