package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestAClientHangingUpIsNotAnError: a client that hangs up while its request
// reads its key (before anything is reserved, so before the run is detached
// from the request) cancels the request, and so the statement it waits in.
// That is the client's doing, not the store's nor a bug: it is counted as
// client_closed with status 499, logged below error, and nothing is stored.
func TestAClientHangingUpIsNotAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logs syncBuffer
	svc := testutil.StartService(t, testutil.ServiceOptions{LogWriter: &logs})
	userID, apiKey := svc.NewUser(t)

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
	req.Header.Set("Authorization", "Bearer "+apiKey)
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
	require.NoError(t, svc.Pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE user_id = $1`, userID).Scan(&keys))
	require.Zero(t, keys)
	require.Equal(t, http.StatusCreated, svc.PostPayment(t, apiKey, "hang-up", visa).Status)
}
