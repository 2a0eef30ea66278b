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
// when a retry's search is answered. Lookups made at once share searches
// (one query asks for up to ten intents), so the budget goes further.
func TestSearchRateLimitAfterALoss(t *testing.T) {
	t.Parallel()
	// One search a second, and 40 new payments at once: one query asks
	// for at most ten intents, so some must be refused.
	const rate, payments = 1, 40
	em := testutil.StartEmulator(t, stripefake.Options{SearchRate: rate, SearchLag: time.Hour})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, HeartbeatInterval: 50 * time.Millisecond,
		Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)
	_, err := svc.Pool.Exec(context.Background(), "UPDATE deployment SET history_lost_at = now() - interval '1 minute'")
	require.NoError(t, err)
	testutil.WaitFor(t, 5*time.Second, 20*time.Millisecond, func() bool { return !svc.App.HistoryLostAt().IsZero() })

	// All at once, and again for those refused, a second of Stripe's
	// clock apart, until every payment is answered.
	answers := make([]*testutil.Response, payments)
	postAll := func() {
		var wg sync.WaitGroup
		for i := range payments {
			if answers[i] == nil || answers[i].Status == http.StatusServiceUnavailable {
				wg.Go(func() { answers[i] = svc.PostPayment(t, apiKey, fmt.Sprintf("new-%d", i), visa) })
			}
		}
		wg.Wait()
	}
	tally := func() (created, refused int) {
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
		return created, refused
	}
	postAll()
	created, refused := tally()
	stats := em.Stats()
	require.Positive(t, stats.SearchesRateLimited, "the test must exceed the limit")
	require.Positive(t, refused)
	require.Len(t, em.PaymentIntents(), created, "a payment whose search was refused was sent")
	t.Logf("at once: %d payments, %d charged, %d refused; %d searches answered, %d refused for rate",
		payments, created, refused, stats.Searches, stats.SearchesRateLimited)
	require.Less(t, int(stats.Searches+stats.SearchesRateLimited), payments/2,
		"lookups made at once share searches: %d searches for %d payments", stats.Searches+stats.SearchesRateLimited, payments)

	for round := 0; created < payments; round++ {
		require.Less(t, round, payments, "still refused after many seconds")
		em.Advance(time.Second)
		postAll()
		created, _ = tally()
		require.Len(t, em.PaymentIntents(), created, "a payment whose search was refused was sent")
	}
	require.Len(t, em.PaymentIntents(), payments, "each payment charged once")
}
