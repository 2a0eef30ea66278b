package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestGracefulShutdown stops the service (as SIGTERM does) while a payment
// is inside its Stripe call: the payment finishes and answers, new requests
// are refused, and the instance deregisters so none of its leases linger.
func TestGracefulShutdown(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultLatency, Latency: time.Second})

	inFlight := testutil.Go(t, func(t testing.TB) *testutil.Response {
		return svc.PostPayment(t, apiKey, "in-flight", visa)
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
}
