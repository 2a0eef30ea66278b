package api_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

var errCrash = errors.New("injected crash")

// TestRecovery covers a run that fails part way, in the process, at Stripe
// or in the store: the key is left where a retry finishes it once, and a
// request the service cannot run safely is refused, never half done.
func TestRecovery(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		userID int64
	}

	setupWith := func(t *testing.T, opts testutil.ServiceOptions) (*testutil.Service, *testBundle) {
		t.Helper()
		svc := testutil.StartService(t, opts)
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, userID: userID}
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		return setupWith(t, testutil.ServiceOptions{})
	}

	t.Run("CrashAfterEachRecoveryPoint", func(t *testing.T) {
		t.Parallel()
		const lease = 300 * time.Millisecond
		cases := []struct {
			name  string
			hooks phases.Hooks
		}{
			// The reservation and the payment committed; Stripe never called.
			{"after payment_created commits", phases.Hooks{AfterCommit: crashOnce(payments.PaymentCreated)}},
			// Stripe charged the card; nothing recorded yet.
			{"after the charge, before charge_created commits", phases.Hooks{AfterCall: crashOnce(payments.PaymentCreated)}},
			// Everything committed; the client never got its answer.
			{"after finished commits", phases.Hooks{AfterCommit: crashOnce(phases.Finished)}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				svc, bundle := setupWith(t, testutil.ServiceOptions{LeaseTimeout: lease, Hooks: tc.hooks})

				crashed := svc.PostPayment(t, bundle.apiKey, "crash", visa)
				requireProblem(t, crashed, http.StatusInternalServerError, "internal-error")

				// The crashed run's lease is still held until it goes stale.
				var retried *testutil.Response
				testutil.WaitFor(t, 10*lease, lease/3, func() bool {
					retried = svc.PostPayment(t, bundle.apiKey, "crash", visa)
					return retried.Status != http.StatusConflict
				})
				require.Equal(t, http.StatusCreated, retried.Status, "body: %s", retried.Body)

				again := svc.PostPayment(t, bundle.apiKey, "crash", visa)
				require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
				require.Equal(t, string(retried.Body), string(again.Body))
				require.Len(t, svc.Stripe.PaymentIntents(), 1)
				require.Equal(t, *decode[payment](t, retried).StripePaymentIntentID, svc.Stripe.PaymentIntents()[0].ID)
			})
		}
	})

	t.Run("RunThatLostItsLeaseCannotWrite", func(t *testing.T) {
		t.Parallel()
		// Run A stalls after its charge came back, before recording it, past
		// its lease: as a GC pause or a slow network would stall it. Rather
		// than sleep out a lease, the test moves the clock leases are judged
		// by two hours on.
		var stalled, later atomic.Bool
		release := make(chan struct{})
		svc, bundle := setupWith(t, testutil.ServiceOptions{
			RequestTimeout: 10 * time.Second,
			StaleAt: func() time.Time {
				if later.Load() {
					return time.Now().Add(2 * time.Hour)
				}
				return time.Now()
			},
			Hooks: phases.Hooks{AfterCall: func(context.Context, phases.RecoveryPoint) error {
				if stalled.CompareAndSwap(false, true) {
					<-release
				}
				return nil
			}},
		})

		first := testutil.Go(t, func(t testing.TB) *testutil.Response {
			return svc.PostPayment(t, bundle.apiKey, "taken-over", visa)
		})
		testutil.WaitFor(t, 5*time.Second, 10*time.Millisecond, stalled.Load)
		later.Store(true)

		// Run B takes the stale lease over and re-sends A's Stripe key: Stripe
		// replays A's PaymentIntent, and B records it.
		second := svc.PostPayment(t, bundle.apiKey, "taken-over", visa)
		require.Equal(t, http.StatusCreated, second.Status, "body: %s", second.Body)

		// A wakes up without its lease: its record is refused and it writes
		// nothing; its client gets the answer the key finished with, not a 409.
		close(release)
		late := first()
		require.Equal(t, http.StatusCreated, late.Status, "body: %s", late.Body)
		require.Equal(t, "true", late.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(second.Body), string(late.Body))
		pis := svc.Stripe.PaymentIntents()
		require.Len(t, pis, 1)
		require.Equal(t, pis[0].ID, *decode[payment](t, second).StripePaymentIntentID)
		var audits int
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM audit_records WHERE action = 'payment.succeeded'").Scan(&audits))
		require.Equal(t, 1, audits, "the stale run recorded nothing")
		replay := svc.PostPayment(t, bundle.apiKey, "taken-over", visa)
		require.Equal(t, string(second.Body), string(replay.Body))
	})

	t.Run("ProcessorFaultsThenRetriesFinishOnce", func(t *testing.T) {
		t.Parallel()
		cases := []struct {
			name  string
			fault stripefake.Fault
		}{
			{"500, cached under the Stripe key", stripefake.Fault{Kind: stripefake.Fault500}},
			{"answer lost after the charge", stripefake.Fault{Kind: stripefake.FaultLostAnswer}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				svc, bundle := setup(t)
				svc.Stripe.Inject(tc.fault)

				first := svc.PostPayment(t, bundle.apiKey, "faulty", visa)
				requireProblem(t, first, http.StatusServiceUnavailable, "processor-unavailable")
				require.NotEmpty(t, first.Header.Get("Retry-After"))

				second := svc.PostPayment(t, bundle.apiKey, "faulty", visa)
				require.Equal(t, http.StatusCreated, second.Status, "body: %s", second.Body)
				require.Empty(t, second.Header.Get("Idempotent-Replayed"))
				third := svc.PostPayment(t, bundle.apiKey, "faulty", visa)
				require.Equal(t, string(second.Body), string(third.Body))

				pis := svc.Stripe.PaymentIntents()
				require.Len(t, pis, 1)
				require.Equal(t, "succeeded", string(pis[0].Status))
			})
		}
	})

	// A Stripe call that never answers is bounded: the request gives up at
	// the Stripe timeout with a retryable 503, frees the key, and the retry
	// resumes with the same Stripe key, charging once.
	t.Run("StripeCallTimesOut", func(t *testing.T) {
		t.Parallel()
		const stripeTimeout = 300 * time.Millisecond
		svc, bundle := setupWith(t, testutil.ServiceOptions{StripeTimeout: stripeTimeout})
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultHang})

		start := time.Now()
		resp := svc.PostPayment(t, bundle.apiKey, "slow", visa)
		requireProblem(t, resp, http.StatusServiceUnavailable, "processor-unavailable")
		require.Less(t, time.Since(start), 5*stripeTimeout, "the call is bounded by the Stripe timeout")

		// The hung call never reached Stripe's bookkeeping; the retry charges once.
		retry := svc.PostPayment(t, bundle.apiKey, "slow", visa)
		require.Equal(t, http.StatusCreated, retry.Status, "body: %s", retry.Body)
		require.Len(t, svc.Stripe.PaymentIntents(), 1)
	})

	t.Run("StoreUnreachableFailsClosed", func(t *testing.T) {
		t.Parallel()
		direct := testutil.NewDB(t)
		cfg := direct.Driver().Config().Copy()
		proxy := testutil.NewProxy(t, cfg.ConnConfig.Host+":"+itoa(int64(cfg.ConnConfig.Port)))
		host, port := splitHostPort(t, proxy.Addr)
		cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, port
		proxied := testutil.ConnectConfig(t, cfg)

		svc, bundle := setupWith(t, testutil.ServiceOptions{Pool: proxied})
		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "before", visa).Status)

		proxy.Cut()
		resp := svc.PostPayment(t, bundle.apiKey, "after", visa)
		requireProblem(t, resp, http.StatusServiceUnavailable, "store-unavailable")
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
		require.EqualValues(t, 1, svc.Stripe.Stats().CreateRequests, "no Stripe call while the store is down")

		// A request that could never succeed is refused as such, not answered
		// "retry later", though its key cannot be read.
		invalid := svc.PostPayment(t, bundle.apiKey, "after", strings.Replace(visa, "2000", "0", 1))
		requireProblem(t, invalid, http.StatusBadRequest, "invalid-request")

		// A read has no key to retry with, and its problem does not say so.
		read := svc.Do(t, http.MethodGet, "/payments/1", "", "Authorization", "Bearer "+bundle.apiKey)
		requireProblem(t, read, http.StatusServiceUnavailable, "store-unavailable")
		require.NotContains(t, string(read.Body), "same key")

		var keys int
		require.NoError(t, direct.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_keys").Scan(&keys))
		require.Equal(t, 1, keys)
	})

	// A store that stops answering within a transaction (here a lock held for
	// ever; a commit waiting for a synchronous standby that is gone is the same
	// to the service) is answered 503 store-unavailable within db.TxTimeout,
	// nothing reserved; once it answers again the retry goes through.
	t.Run("AStalledStoreIsA503WithinTheBound", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setupWith(t, testutil.ServiceOptions{Workers: quietCompleter})
		ctx := context.Background()
		stall, err := svc.Pool.Driver().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = stall.Rollback(ctx) }()
		// A key's insert takes a share lock on its user row (the foreign key).
		_, err = stall.Exec(ctx, "SELECT 1 FROM users WHERE id = $1 FOR UPDATE", bundle.userID)
		require.NoError(t, err)

		start := time.Now()
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "stalled", visa), http.StatusServiceUnavailable, "store-unavailable")
		took := time.Since(start)
		require.GreaterOrEqual(t, took, db.TxTimeout-time.Second)
		require.Less(t, took, db.TxTimeout+3*time.Second, "bounded by the transaction's timeout, not the request's")

		require.NoError(t, stall.Rollback(ctx))
		resp := svc.PostPayment(t, bundle.apiKey, "stalled", visa)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Empty(t, resp.Header.Get("Idempotent-Replayed"), "nothing was reserved by the stalled request")
	})
}

// crashOnce returns a hook that crashes the run the first time it fires at
// point, as if the process died there.
func crashOnce(point phases.RecoveryPoint) func(context.Context, phases.RecoveryPoint) error {
	var fired atomic.Bool
	return func(_ context.Context, at phases.RecoveryPoint) error {
		if at == point && fired.CompareAndSwap(false, true) {
			return errCrash
		}
		return nil
	}
}

func splitHostPort(t *testing.T, addr string) (string, uint16) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.ParseUint(port, 10, 16)
	require.NoError(t, err)
	return host, uint16(n)
}
