package payments

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
)

// searchRig is an emulator, a client of it, and a PaymentIntent of each of
// intents, by intent.
func searchRig(t *testing.T, intents ...string) (*stripefake.Server, *client.API, map[string]string) {
	t.Helper()
	em := stripefake.New(stripefake.Options{})
	srv := httptest.NewServer(em)
	t.Cleanup(srv.Close)
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL: stripe.String(srv.URL), MaxNetworkRetries: stripe.Int64(0), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	api := client.New("sk_test_pool", &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
	created := map[string]string{}
	for _, id := range intents {
		params := &stripe.PaymentIntentParams{Amount: stripe.Int64(1000), Currency: stripe.String("usd"),
			PaymentMethod: stripe.String("pm_card_visa"), Confirm: stripe.Bool(true)}
		params.AddMetadata(intent.MetadataIntent, id)
		pi, err := api.PaymentIntents.New(params)
		require.NoError(t, err)
		created[id] = pi.ID
	}
	return em, api, created
}

// TestSearchPool: lookups waiting together share one search and each gets
// its own intent's PaymentIntents; a lookup whose deadline comes before its
// turn is refused at once, and one that gave up before its turn makes no
// search.
func TestSearchPool(t *testing.T) {
	t.Parallel()
	em, api, created := searchRig(t, "intent-a", "intent-b")

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

	// A lookup whose deadline comes before its turn is refused at once.
	later := func() {
		pool.mu.Lock()
		defer pool.mu.Unlock()
		pool.next = time.Now().Add(200 * time.Millisecond)
	}
	later()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := pool.search(ctx, "intent-a")
	require.ErrorIs(t, err, errSearchBusy)
	require.Less(t, time.Since(start), 20*time.Millisecond, "refused without waiting")

	// One that gives up while it waits is not searched for.
	later()
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = pool.search(ctx, "intent-a")
	require.ErrorIs(t, err, context.Canceled)
	time.Sleep(300 * time.Millisecond) // past its turn
	require.EqualValues(t, 1, em.Stats().Searches, "no search for a batch no one waits for")
}

// TestSearchPoolAbandonedBatchesFreeTheirTurn: a burst of lookups that give
// up quickly (their requests' deadlines, or their clients gone) must not
// keep the search turns they would have had. They did: every batch took
// its turn when it was made, so 500 lookups gone after 30 ms booked 50
// turns, five seconds of searches for no one, and every lookup after them
// failed until that backlog had passed; above 100 lookups a second, every
// lookup failed.
func TestSearchPoolAbandonedBatchesFreeTheirTurn(t *testing.T) {
	t.Parallel()
	const burst, patience = 500, 30 * time.Millisecond
	for _, tc := range []struct {
		name   string
		giveUp func() (context.Context, context.CancelFunc)
	}{
		{"Deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), patience)
		}},
		{"Canceled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(patience, cancel)
			return ctx, cancel
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, api, created := searchRig(t, "wanted")
			pool := newSearchPool(api, 5*time.Second)
			var wg sync.WaitGroup
			for i := range burst {
				wg.Go(func() {
					ctx, cancel := tc.giveUp()
					defer cancel()
					_, _ = pool.search(ctx, fmt.Sprintf("impatient-%d", i))
				})
			}
			wg.Wait()

			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			start := time.Now()
			pis, err := pool.search(ctx, "wanted")
			require.NoError(t, err, "a lookup after %d abandoned ones, %s later", burst, time.Since(start).Round(time.Millisecond))
			require.Len(t, pis, 1)
			require.Equal(t, created["wanted"], pis[0].ID)
		})
	}
}
