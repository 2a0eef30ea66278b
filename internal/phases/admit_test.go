package phases_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/phases"
)

// TestAdmitIsAskedOnlyForANewKey: a request's Admit vets a key about to be
// created; a refusal creates nothing and a later admitted request with the
// same key proceeds; a key that exists (a replay) is answered without
// asking, since it was admitted when it was created.
func TestAdmitIsAskedOnlyForANewKey(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{})
	require.NoError(t, b.register(shipmentFlow(
		logStep(phases.Started, "slot"),
		finish("slot_booked"),
	)))
	errNoSuchParcel := errors.New("no such parcel")
	var asked atomic.Int64
	refuse := true
	request := func() *phases.Request {
		req := b.request("admit")
		req.Admit = func(context.Context) error {
			asked.Add(1)
			if refuse {
				return errNoSuchParcel
			}
			return nil
		}
		return req
	}

	_, err := b.engine.Execute(context.Background(), request())
	require.ErrorIs(t, err, errNoSuchParcel)
	var keys int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys`).Scan(&keys))
	require.Zero(t, keys, "a refused request stores nothing")

	refuse = false
	res, err := b.engine.Execute(context.Background(), request())
	require.NoError(t, err)
	require.False(t, res.Replayed)
	require.EqualValues(t, 2, asked.Load())

	refuse = true // were it asked again, it would refuse
	again, err := b.engine.Execute(context.Background(), request())
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.Equal(t, res.Response.Body, again.Response.Body)
	require.EqualValues(t, 2, asked.Load(), "a replay is not asked")
}
