package stripefake_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// TestCreateTraffic: the traffic is listed like any PaymentIntent made by a
// create request.
func TestCreateTraffic(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	e.fake.CreateTraffic(150)
	params := &stripe.PaymentIntentListParams{}
	params.Limit = stripe.Int64(100)
	it := e.sc.PaymentIntents.List(params)
	n := 0
	for it.Next() {
		pi := it.PaymentIntent()
		require.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)
		require.EqualValues(t, 1000, pi.Amount)
		n++
	}
	require.NoError(t, it.Err())
	require.Equal(t, 150, n)
	require.EqualValues(t, 150, e.fake.Stats().PaymentIntentsCreated)
}
