package api_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestSearchRateLimitAfterALoss: for 72 h after the database lost history,
// every new key is looked up by search before its first send, and Stripe
// refuses search beyond about 20 requests a second. More new payments a
// second than the limit: a payment whose search was refused is never sent
// (its outcome stays unknown: 503 with Retry-After), and is sent, once,
// when a retry's search is answered.
func TestSearchRateLimitAfterALoss(t *testing.T) {
	t.Parallel()
	const rate, payments = 4, 24
	em := testutil.StartEmulator(t, stripefake.Options{SearchRate: rate, SearchLag: time.Hour})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, HeartbeatInterval: 50 * time.Millisecond,
		Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)
	_, err := svc.Pool.Exec(context.Background(), "UPDATE deployment SET history_lost_at = now() - interval '1 minute'")
	require.NoError(t, err)
	testutil.WaitFor(t, 5*time.Second, 20*time.Millisecond, func() bool { return !svc.App.HistoryLostAt().IsZero() })

	// All at once: far more than rate a second.
	answers := make([]*testutil.Response, payments)
	var wg sync.WaitGroup
	for i := range payments {
		wg.Go(func() { answers[i] = svc.PostPayment(t, apiKey, fmt.Sprintf("new-%d", i), visa) })
	}
	wg.Wait()
	created, refused := 0, 0
	for i, resp := range answers {
		switch resp.Status {
		case http.StatusCreated:
			created++
		case http.StatusServiceUnavailable:
			refused++
			require.NotEmpty(t, resp.Header.Get("Retry-After"), "payment %d: body %s", i, resp.Body)
			require.NotContains(t, string(resp.Body), "needs-attention", "a refused search is not the operator's")
		default:
			t.Fatalf("payment %d: %d %s", i, resp.Status, resp.Body)
		}
	}
	stats := em.Stats()
	require.Positive(t, stats.SearchesRateLimited, "the test must exceed the limit")
	require.Positive(t, refused)
	require.Len(t, em.PaymentIntents(), created, "a payment whose search was refused was sent")
	require.LessOrEqual(t, int(stats.Searches), payments, "no search is wasted: at most one per payment")

	// Retries, a second of Stripe's clock apart, until every payment is
	// answered; each is charged once.
	for round := 0; created < payments; round++ {
		require.Less(t, round, 2*payments/rate+5, "still refused after many seconds")
		em.Advance(time.Second)
		for i, resp := range answers {
			if resp.Status == http.StatusServiceUnavailable {
				answers[i] = svc.PostPayment(t, apiKey, fmt.Sprintf("new-%d", i), visa)
				if answers[i].Status == http.StatusCreated {
					created++
				}
			}
		}
	}
	require.Len(t, em.PaymentIntents(), payments, "each payment charged once")
}
