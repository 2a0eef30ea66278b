package phases_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// TestRestoreLeavesAKeyInUseAndItsTombstoneAlone: Restore brings a reaped
// key back from its tombstone by what it made. When a live key holds the
// same (user, idempotency key), the key cannot come back under it: the
// tombstone must stay, and Restore must say why. The restore deleted the
// tombstone, then inserted ON CONFLICT DO NOTHING: the key was not brought
// back, the tombstone was gone for good, and the caller was told "no
// tombstone is left".
func TestRestoreLeavesAKeyInUseAndItsTombstoneAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{LeaseTimeout: time.Minute})
	require.NoError(t, b.register(shipmentFlow(logStep(phases.Started, "book"), finish("booked"))))
	ctx := context.Background()

	// A live, finished key "order-1" and, beside it, a tombstone of the
	// same name for shipment 7, which no path of the service makes
	// (IdempotencyKeyInsert refuses a name with a tombstone), yet a
	// restored backup or a hand's edit can leave.
	resp, err := b.engine.Execute(ctx, b.request("order-1"))
	require.NoError(t, err)
	require.Equal(t, 201, resp.Response.Status)
	live := keyColumn[int64](t, b, "order-1", "id")
	sum := sha256.Sum256([]byte("order-1"))
	_, err = b.pool.Exec(ctx, `INSERT INTO idempotency_key_tombstones
		(user_id, idempotency_key, request_method, request_path, request_fingerprint, response_code, resource_type, resource_id, finished_at)
		VALUES ($1, 'order-1', 'POST', '/shipments', $2, 402, 'shipment', 7, now() - interval '2 days')`, b.userID, sum[:])
	require.NoError(t, err)

	var restored bool
	err = db.WithTx(ctx, b.pool, func(ctx context.Context, tx db.Tx) error {
		var err error
		_, restored, err = b.engine.Restore(ctx, tx, phases.Reaped{
			ResourceType: "shipment", ResourceID: 7, Method: "POST", Path: "/shipments",
			Flow: "shipment", CreatedAt: time.Now().Add(-3 * 24 * time.Hour),
		}, "booked", "the courier says shipment 7 was booked")
		return err
	})
	require.False(t, restored)
	var tombstones int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_key_tombstones WHERE user_id = $1`, b.userID).Scan(&tombstones))
	require.Equal(t, 1, tombstones, "the tombstone of shipment 7 must stay")
	var inUse *phases.KeyInUseError
	require.ErrorAs(t, err, &inUse, "Restore must say that live key %d holds the name", live)
	require.Equal(t, live, inUse.KeyID)
	require.Equal(t, "finished", b.point(t, "order-1"), "the live key is left alone")
	require.Zero(t, b.commits.parked.Load())
}
