package stripefake_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/stripefake"
)

func TestFault500(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500})

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "k500"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeAPI, se.Type)
	require.Empty(t, e.fake.PaymentIntents())

	// Stripe saved the 500 under the key: the retry replays it.
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "k500"))
	se = stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode)
	require.Equal(t, "true", se.LastResponse.Header.Get("Idempotent-Replayed"))

	// A new key executes.
	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "k500-new"))
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.Faults500)
	require.EqualValues(t, 1, st.Replays)
	require.EqualValues(t, 1, st.PaymentIntentsCreated)
}

// requireNetworkError asserts err is a transport error, not a Stripe answer.
func requireNetworkError(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	var se *stripe.Error
	require.False(t, errors.As(err, &se), "want a network error, got Stripe error %v", err)
}

func TestFaultLostAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer})

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "lost"))
	requireNetworkError(t, err)
	pis := e.fake.PaymentIntents()
	require.Len(t, pis, 1)
	require.Equal(t, stripefake.StatusSucceeded, pis[0].Status)

	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "lost"))
	require.NoError(t, err)
	require.Equal(t, pis[0].ID, pi.ID)
	require.Equal(t, "true", pi.LastResponse.Header.Get("Idempotent-Replayed"))

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.PaymentIntentsCreated)
	require.EqualValues(t, 1, st.LostAnswers)
	require.EqualValues(t, 1, st.Replays)
}

// Go's transport silently resends a request with an Idempotency-Key when a
// reused keep-alive connection closes without a byte; the answer must still
// be lost for the client.
func TestFaultLostAnswerOnReusedConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	for i := range 3 {
		_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "warm", ""))
		require.NoError(t, err, i)
	}
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer})
	_, err := e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclined", "1", "lost-reused"))
	requireNetworkError(t, err)
	require.EqualValues(t, 0, e.fake.Stats().Replays)

	_, err = e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclined", "1", "lost-reused"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusPaymentRequired, se.HTTPStatusCode)
	require.Equal(t, "true", se.LastResponse.Header.Get("Idempotent-Replayed"))
	require.EqualValues(t, 4, e.fake.Stats().PaymentIntentsCreated)
}

func TestFaultLatency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	const latency = 150 * time.Millisecond
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultLatency, Latency: latency})

	start := time.Now()
	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", ""))
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), latency)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)

	start = time.Now()
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "2", ""))
	require.NoError(t, err)
	require.Less(t, time.Since(start), latency)
	require.EqualValues(t, 1, e.fake.Stats().Latencies)
}

// Like Stripe, a slow request keeps executing after its client timed out.
func TestLatencyOutlivesClientTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultLatency, Latency: 300 * time.Millisecond})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	p := piParams("pm_card_visa", "1", "slow")
	p.Context = ctx
	_, err := e.sc.PaymentIntents.New(p)
	requireNetworkError(t, err)

	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "slow"))
	require.Equal(t, stripe.ErrorCodeIdempotencyKeyInUse, stripeErr(t, err).Code)

	require.Eventually(t, func() bool { return e.fake.Stats().PaymentIntentsCreated == 1 }, 5*time.Second, 5*time.Millisecond)
	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "slow"))
	require.NoError(t, err)
	require.Equal(t, "true", pi.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, e.fake.PaymentIntents()[0].ID, pi.ID)
}

func TestHangAbandonedByClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultHang})

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	p := piParams("pm_card_visa", "1", "abandoned")
	p.Context = ctx
	_, err := e.sc.PaymentIntents.New(p)
	requireNetworkError(t, err)
	require.Eventually(t, func() bool { return e.fake.Stats().HungNow == 0 }, 5*time.Second, time.Millisecond)
	require.Empty(t, e.fake.PaymentIntents())

	// Nothing was saved, so the retry executes.
	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "abandoned"))
	require.NoError(t, err)
	require.Empty(t, pi.LastResponse.Header.Get("Idempotent-Replayed"))
	require.EqualValues(t, 1, e.fake.Stats().Hangs)
}

func TestInjectedFaultsFIFOSkipReplaysAndInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500}, stripefake.Fault{Kind: stripefake.FaultLatency})
	require.Equal(t, 2, e.fake.PendingFaults())

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "fifo-1"))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "fifo-1")) // replay
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	bad := piParams("pm_card_visa", "1", "fifo-bad")
	bad.Amount = stripe.Int64(0)
	_, err = e.sc.PaymentIntents.New(bad) // validation failure
	require.Equal(t, http.StatusBadRequest, stripeErr(t, err).HTTPStatusCode)
	require.Equal(t, 1, e.fake.PendingFaults())

	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "2", "fifo-2"))
	require.NoError(t, err)
	require.Equal(t, 0, e.fake.PendingFaults())
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "3", "fifo-3"))
	require.NoError(t, err)
	require.EqualValues(t, 1, e.fake.Stats().Faults500)
}
