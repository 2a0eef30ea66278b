package stripefake_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// TestSearchRateLimit: beyond Options.SearchRate searches a second (by the
// server's clock) search answers 429 rate_limit, as Stripe does, which
// stripe-go hands back without retrying; a second later the rate is
// there again. Lists, creates and retrieves are not limited.
func TestSearchRateLimit(t *testing.T) {
	t.Parallel()
	clock := newClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	e := newEnv(t, stripefake.Options{SearchRate: 3, Now: clock.Now})
	// A client that retries what stripe-go deems safe to retry: a 429
	// that is not a lock_timeout is not.
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL: stripe.String(e.srv.URL), MaxNetworkRetries: stripe.Int64(2),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull}, HTTPClient: e.srv.Client(),
	})
	retrying := client.New("sk_test_123", &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
	query := "metadata['payment_id']:'1'"
	for range 3 {
		search(t, e, query)
	}
	it := retrying.PaymentIntents.Search(&stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: query}})
	require.False(t, it.Next())
	serr := stripeErr(t, it.Err())
	require.Equal(t, http.StatusTooManyRequests, serr.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeRateLimit, serr.Code)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, serr.Type)
	st := e.fake.Stats()
	require.EqualValues(t, 3, st.Searches)
	require.EqualValues(t, 1, st.SearchesRateLimited, "refused once: stripe-go does not retry a rate limit")

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", ""))
	require.NoError(t, err, "creates are not limited")

	clock.Add(400 * time.Millisecond)
	search(t, e, query) // 0.4 s at 3 a second refills one search, not two
	it = e.sc.PaymentIntents.Search(&stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: query}})
	require.False(t, it.Next())
	require.Equal(t, http.StatusTooManyRequests, stripeErr(t, it.Err()).HTTPStatusCode)

	e.fake.Advance(time.Hour) // a bucket holds one second's worth, no more
	for range 3 {
		search(t, e, query)
	}
	it = e.sc.PaymentIntents.Search(&stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: query}})
	require.False(t, it.Next())
	require.Equal(t, http.StatusTooManyRequests, stripeErr(t, it.Err()).HTTPStatusCode)
}
