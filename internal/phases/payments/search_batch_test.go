package payments

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
)

// TestSearchPool: lookups waiting together share one search and each gets
// its own intent's PaymentIntents; a batch whose callers all gave up before
// its turn makes no search.
func TestSearchPool(t *testing.T) {
	t.Parallel()
	em := stripefake.New(stripefake.Options{})
	srv := httptest.NewServer(em)
	t.Cleanup(srv.Close)
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL: stripe.String(srv.URL), MaxNetworkRetries: stripe.Int64(0), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	api := client.New("sk_test_pool", &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
	created := map[string]string{}
	for _, id := range []string{"intent-a", "intent-b"} {
		params := &stripe.PaymentIntentParams{Amount: stripe.Int64(1000), Currency: stripe.String("usd"),
			PaymentMethod: stripe.String("pm_card_visa"), Confirm: stripe.Bool(true)}
		params.AddMetadata(intent.MetadataIntent, id)
		pi, err := api.PaymentIntents.New(params)
		require.NoError(t, err)
		created[id] = pi.ID
	}

	pool := newSearchPool(api, 5*time.Second)
	pool.next = time.Now().Add(200 * time.Millisecond) // the next turn is later: both wait for it
	type answer struct {
		pis []*stripe.PaymentIntent
		err error
	}
	answers := map[string]chan answer{"intent-a": make(chan answer, 1), "intent-b": make(chan answer, 1)}
	for id, ch := range answers {
		go func() {
			pis, err := pool.search(context.Background(), id)
			ch <- answer{pis, err}
		}()
	}
	for id, ch := range answers {
		got := <-ch
		require.NoError(t, got.err)
		require.Len(t, got.pis, 1, id)
		require.Equal(t, created[id], got.pis[0].ID)
	}
	require.EqualValues(t, 1, em.Stats().Searches, "one search for both")

	pool.next = time.Now().Add(200 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := pool.search(ctx, "intent-a")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	time.Sleep(300 * time.Millisecond) // past the batch's turn
	require.EqualValues(t, 1, em.Stats().Searches, "no search for a batch no one waits for")
}
