package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestConcurrency covers requests that arrive at once, on one key or many.
func TestConcurrency(t *testing.T) {
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

	t.Run("ConcurrentRequestsOnOneKey", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		// The first charge is slow, so every other request arrives while the
		// first run still holds the key.
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultLatency, Latency: 500 * time.Millisecond})

		responses := concurrently(t, 50, func(t testing.TB, _ int) *testutil.Response {
			return svc.PostPayment(t, bundle.apiKey, "one-key", visa)
		})

		var created []string
		conflicts := 0
		for _, resp := range responses {
			switch resp.Status {
			case http.StatusCreated:
				created = append(created, string(resp.Body))
			case http.StatusConflict:
				conflicts++
				requireProblem(t, resp, http.StatusConflict, "idempotency-key-in-use")
				require.NotEmpty(t, resp.Header.Get("Retry-After"))
			default:
				t.Fatalf("unexpected status %d: %s", resp.Status, resp.Body)
			}
		}
		require.NotEmpty(t, created)
		require.NotZero(t, conflicts)
		for _, body := range created {
			require.Equal(t, created[0], body)
		}
		require.Len(t, svc.Stripe.PaymentIntents(), 1)
		require.EqualValues(t, 1, svc.Stripe.Stats().CreateRequests)
	})

	t.Run("ConcurrentRequestsOnDistinctKeys", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		responses := concurrently(t, 100, func(t testing.TB, i int) *testutil.Response {
			return svc.PostPayment(t, bundle.apiKey, fmt.Sprintf("distinct-%d", i), visa)
		})
		for _, resp := range responses {
			require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		}
		require.Len(t, svc.Stripe.PaymentIntents(), 100)
	})
}

// concurrently sends n requests at once and returns their responses. Each
// send runs on a goroutine of its own, with the testing.TB to use there.
func concurrently(t *testing.T, n int, send func(t testing.TB, i int) *testutil.Response) []*testutil.Response {
	t.Helper()
	start := make(chan struct{})
	waits := make([]func() *testutil.Response, n)
	for i := range n {
		waits[i] = testutil.Go(t, func(t testing.TB) *testutil.Response {
			<-start
			return send(t, i)
		})
	}
	close(start)
	out := make([]*testutil.Response, n)
	for i, wait := range waits {
		out[i] = wait()
	}
	return out
}
