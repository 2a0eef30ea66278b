package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// A store that stops answering within a transaction (here a lock held for
// ever; a commit waiting for a synchronous standby that is gone is the same
// to the service) is answered 503 store-unavailable within db.TxTimeout,
// nothing reserved; once it answers again the retry goes through.
func TestAStalledStoreIsA503WithinTheBound(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	ctx := context.Background()
	stall, err := svc.Pool.Driver().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = stall.Rollback(ctx) }()
	// A key's insert takes a share lock on its user row (the foreign key).
	_, err = stall.Exec(ctx, "SELECT 1 FROM users WHERE id = $1 FOR UPDATE", userID)
	require.NoError(t, err)

	start := time.Now()
	requireProblem(t, svc.PostPayment(t, apiKey, "stalled", visa), http.StatusServiceUnavailable, "store-unavailable")
	took := time.Since(start)
	require.GreaterOrEqual(t, took, db.TxTimeout-time.Second)
	require.Less(t, took, db.TxTimeout+3*time.Second, "bounded by the transaction's timeout, not the request's")

	require.NoError(t, stall.Rollback(ctx))
	resp := svc.PostPayment(t, apiKey, "stalled", visa)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	require.Empty(t, resp.Header.Get("Idempotent-Replayed"), "nothing was reserved by the stalled request")
}

// /readyz answers 503 while the instance's heartbeats cannot commit: a read
// alone would not see a commit that never finishes.
func TestReadyzSaysSoWhenCommitsStall(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{HeartbeatInterval: 100 * time.Millisecond})
	ready := func() int { return svc.Do(t, http.MethodGet, "/readyz", "").Status }
	require.Equal(t, http.StatusOK, ready())

	ctx := context.Background()
	stall, err := svc.Pool.Driver().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = stall.Rollback(ctx) }()
	_, err = stall.Exec(ctx, "SELECT 1 FROM instances FOR UPDATE")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return ready() == http.StatusServiceUnavailable }, 5*time.Second, 50*time.Millisecond)
	requireProblem(t, svc.Do(t, http.MethodGet, "/readyz", ""), http.StatusServiceUnavailable, "store-unavailable")

	require.NoError(t, stall.Rollback(ctx))
	require.Eventually(t, func() bool { return ready() == http.StatusOK }, 5*time.Second, 50*time.Millisecond)
}
