package api_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestHangUp covers a client that goes away: before its key is read, while
// it is read, and once it is reserved, after which the run no longer
// depends on the client (phases.Request.RunTimeout).
func TestHangUp(t *testing.T) {
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

	// A client that hangs up while its request reads its key (before anything
	// is reserved, so before the run is detached from the request) cancels
	// the request, and so the statement it waits in.
	// That is the client's doing, not the store's nor a bug: it is counted as
	// client_closed with status 499, logged below error, and nothing is stored.
	t.Run("AClientHangingUpIsNotAnError", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		var logs syncBuffer
		svc, bundle := setupWith(t, testutil.ServiceOptions{LogWriter: &logs})

		// Another transaction holds the keys' table (a migration, say): the
		// request's read of its key waits for it.
		blocker, err := svc.Pool.Driver().Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = blocker.Rollback(ctx) }()
		_, err = blocker.Exec(ctx, `LOCK TABLE idempotency_keys IN ACCESS EXCLUSIVE MODE`)
		require.NoError(t, err)

		reqCtx, hangUp := context.WithCancel(ctx)
		req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, svc.URL+"/payments", strings.NewReader(visa))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+bundle.apiKey)
		req.Header.Set("Idempotency-Key", "hang-up")
		req.Header.Set("Content-Type", "application/json")
		done := svc.Send(req)
		waiting := func(n int) func() bool {
			return func() bool {
				var count int
				err := svc.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&count)
				return err == nil && count == n
			}
		}
		require.Eventually(t, waiting(1), 10*time.Second, 10*time.Millisecond, "the read of the key waits for the lock")
		hangUp()
		require.ErrorIs(t, <-done, context.Canceled)
		require.Eventually(t, waiting(0), 10*time.Second, 10*time.Millisecond, "the hang-up cancels the read")
		// The metrics read the keys' table too.
		require.NoError(t, blocker.Rollback(ctx))

		var metrics string
		require.Eventually(t, func() bool {
			metrics = string(svc.Do(t, http.MethodGet, "/metrics", "").Body)
			return strings.Contains(metrics, `paymentsd_http_requests_total{method="POST",route="/payments"`)
		}, 10*time.Second, 20*time.Millisecond, "the request is counted once it ends")
		require.Contains(t, metrics, `paymentsd_idempotency_outcomes_total{flow="payment",outcome="client_closed"} 1`)
		require.Contains(t, metrics, `paymentsd_http_requests_total{method="POST",route="/payments",status="499"} 1`)
		for _, outcome := range []string{"store_error", "internal_error"} {
			require.Contains(t, metrics, `paymentsd_idempotency_outcomes_total{flow="payment",outcome="`+outcome+`"} 0`)
		}
		require.NotContains(t, logs.String(), `"level":"error"`)

		// Nothing was stored, and a retry makes the payment.
		var keys int
		require.NoError(t, svc.Pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE user_id = $1`, bundle.userID).Scan(&keys))
		require.Zero(t, keys)
		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "hang-up", visa).Status)
	})

	// A client already gone when the engine reads its key reserves nothing
	// and leaves no lease.
	t.Run("AClientGoneBeforeTheReadReservesNothing", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		body := []byte(`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`)
		canonical, sum, err := idempotency.Fingerprint(http.MethodPost, "/payments", body)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = svc.App.Engine.Execute(ctx, &phases.Request{
			UserID: bundle.userID, Key: "gone", Flow: payments.FlowName, Method: http.MethodPost, Path: "/payments",
			Params: canonical, Fingerprint: sum, RunTimeout: 10 * time.Second,
		})
		require.Error(t, err)
		var keys int
		require.NoError(t, svc.Pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys`).Scan(&keys))
		require.Zero(t, keys)
	})

	// The client goes away once its key is reserved (payment_created
	// committed): the run must not see the hang-up, and must finish by
	// itself, with no completer.
	t.Run("ARunReservedBeforeTheClientHangsUpFinishesByItself", func(t *testing.T) {
		t.Parallel()
		reserved := make(chan struct{}, 1)
		release := make(chan struct{})
		var cancelled atomic.Bool
		opts := testutil.ServiceOptions{Hooks: phases.Hooks{AfterCommit: func(ctx context.Context, point phases.RecoveryPoint) error {
			if point != payments.PaymentCreated {
				return nil
			}
			reserved <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				cancelled.Store(true)
				return ctx.Err()
			}
			return nil
		}}}
		opts.Workers.Completer.Interval = time.Hour // the run must finish by itself
		svc, bundle := setupWith(t, opts)

		ctx, hangUp := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, svc.URL+"/payments",
			strings.NewReader(`{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+bundle.apiKey)
		req.Header.Set("Idempotency-Key", "hang-up-after-reserve")
		done := svc.Send(req)
		<-reserved
		hangUp()
		require.Error(t, <-done)
		time.Sleep(300 * time.Millisecond) // the server sees the connection close
		close(release)

		var point string
		testutil.WaitFor(t, 5*time.Second, 20*time.Millisecond, func() bool {
			require.NoError(t, svc.Pool.QueryRow(context.Background(),
				`SELECT recovery_point FROM idempotency_keys WHERE idempotency_key = 'hang-up-after-reserve'`).Scan(&point))
			return point == string(phases.Finished)
		})
		require.False(t, cancelled.Load(), "the run saw the client's hang-up")
		var status string
		require.NoError(t, svc.Pool.QueryRow(context.Background(), `SELECT status FROM payments`).Scan(&status))
		require.Equal(t, payments.StatusSucceeded, status)
	})
}
