package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestShutdown covers stopping the service as SIGTERM does.
func TestShutdown(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		userID int64
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		svc := testutil.StartService(t, testutil.ServiceOptions{})
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, userID: userID}
	}

	// The service stops (as SIGTERM stops it) while a payment is inside its
	// Stripe call: the payment finishes and answers, new requests are
	// refused, and the instance deregisters so none of its leases linger.
	t.Run("GracefulShutdown", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultLatency, Latency: time.Second})

		inFlight := testutil.Go(t, func(t testing.TB) *testutil.Response {
			return svc.PostPayment(t, bundle.apiKey, "in-flight", visa)
		})
		testutil.WaitFor(t, 5*time.Second, 5*time.Millisecond, func() bool { return svc.Stripe.Stats().Latencies == 1 })

		start := time.Now()
		require.NoError(t, svc.Stop())
		require.Less(t, time.Since(start), 10*time.Second, "shutdown is bounded")

		resp := inFlight()
		require.Equal(t, http.StatusCreated, resp.Status, "the in-flight payment finished: %s", resp.Body)

		_, err := svc.Client.Get(svc.URL + "/healthz")
		require.Error(t, err, "no new requests after shutdown")

		var instances, leased int
		require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT count(*) FROM instances").Scan(&instances))
		require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_keys WHERE lock_token IS NOT NULL").Scan(&leased))
		require.Zero(t, instances)
		require.Zero(t, leased)
	})
}
