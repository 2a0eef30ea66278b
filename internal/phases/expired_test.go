package phases_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// TestATombstoneAnswersTheIDItsClientSaw: the engine knows no resource
// type. A tombstone keeps the prefix of the id the client saw of what its
// key made, and a late retry is told that id, prefix and all, whatever
// the resource: here a shipment, "shp_…". The engine named every resource
// but a refund "pay_…".
func TestATombstoneAnswersTheIDItsClientSaw(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{LeaseTimeout: time.Minute})
	require.NoError(t, b.register(shipmentFlow(logStep(phases.Started, "book"), finish("booked"))))
	ctx := context.Background()

	req := b.request("order-1")
	booked := ids.New()
	_, err := b.pool.Exec(ctx, `INSERT INTO idempotency_key_tombstones
		(user_id, idempotency_key, request_method, request_path, request_fingerprint, response_code,
		 resource_type, resource_id, resource_public_id, resource_prefix, finished_at)
		VALUES ($1, 'order-1', 'POST', '/shipments', $2, 201, 'shipment', 7, $3, 'shp', now() - interval '2 days')`,
		b.userID, req.Fingerprint, booked)
	require.NoError(t, err)

	_, err = b.engine.Execute(ctx, req)
	var expired *phases.KeyExpiredError
	require.ErrorAs(t, err, &expired)
	require.True(t, expired.SameRequest)
	require.Equal(t, 201, expired.ResponseCode)
	require.Equal(t, "shipment", expired.ResourceType)
	require.Equal(t, ids.Format("shp", booked), expired.ResourceID)
	require.Empty(t, b.steps(t, "order-1"), "the request is not run again")
}
