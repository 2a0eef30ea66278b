package workers_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

func TestReaperSparesUnfinishedKeysAndKeepsPayments(t *testing.T) {
	t.Parallel()
	b := setupService(t, testutil.ServiceOptions{LeaseTimeout: 200 * time.Millisecond})
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
	b := setupService(t, testutil.ServiceOptions{})
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
