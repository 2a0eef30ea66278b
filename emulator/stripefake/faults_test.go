package stripefake_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
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

	require.Eventually(t, func() bool {
		st := e.fake.Stats()
		return st.PaymentIntentsCreated == 1 && st.ExecutingNow == 0
	}, 5*time.Second, 5*time.Millisecond)
	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "slow"))
	require.NoError(t, err)
	require.Equal(t, "true", pi.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, e.fake.PaymentIntents()[0].ID, pi.ID)
	require.EqualValues(t, 1, e.fake.Stats().ClientsGone)
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

// The indeterminate 500: the charge happened, the answer says otherwise, and
// the retry with the same key replays the 500 rather than the PaymentIntent.
func TestFault500Charged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged})

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "charged"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeAPI, se.Type)
	require.Nil(t, se.PaymentIntent)
	pis := e.fake.PaymentIntents()
	require.Len(t, pis, 1)
	require.Equal(t, stripefake.StatusSucceeded, pis[0].Status)
	require.Equal(t, "charged", pis[0].IdempotencyKey)
	require.Equal(t, "1", pis[0].Metadata["payment_id"])

	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "charged"))
	replay := stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, replay.HTTPStatusCode)
	require.Equal(t, "true", replay.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, se.RequestID, replay.LastResponse.Header.Get("Original-Request"))

	// The PaymentIntent is real: retrieve finds it.
	got, err := e.sc.PaymentIntents.Get(pis[0].ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status)

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.Faults500Charged)
	require.EqualValues(t, 0, st.Faults500)
	require.EqualValues(t, 1, st.PaymentIntentsCreated)
	require.EqualValues(t, 1, st.Replays)
}

// A 500_charged on a declining card still runs the decline.
func TestFault500ChargedDecline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500}, stripefake.Fault{Kind: stripefake.Fault500Charged})

	// Fault500 and Fault500Charged answer the same bytes but for the request id.
	_, err := e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclined", "1", "plain-500"))
	plain := stripeErr(t, err)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclined", "2", "charged-500"))
	charged := stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, charged.HTTPStatusCode)
	require.Equal(t, plain.Msg, charged.Msg)
	require.Equal(t, plain.Type, charged.Type)

	pis := e.fake.PaymentIntents()
	require.Len(t, pis, 1)
	require.Equal(t, stripefake.StatusRequiresPaymentMethod, pis[0].Status)
	require.Equal(t, "generic_decline", pis[0].DeclineCode)
	require.EqualValues(t, 1, e.fake.Stats().Declines)
}

func TestFaultIdempotencyError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "idem-fault"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
	require.Contains(t, se.Msg, "'idem-fault'")
	var ie *stripe.IdempotencyError
	require.ErrorAs(t, err, &ie)
	require.Empty(t, e.fake.PaymentIntents())

	// Nothing was saved: the same key executes now.
	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "idem-fault"))
	require.NoError(t, err)
	require.Empty(t, pi.LastResponse.Header.Get("Idempotent-Replayed"))

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.FaultsIdempotencyError)
	require.EqualValues(t, 0, st.IdempotencyErrors)
	require.EqualValues(t, 1, st.PaymentIntentsCreated)
	require.EqualValues(t, 0, st.Replays)
}

// outlive_client: the client times out, the request goes on, creates and
// saves; meanwhile the key is in use.
func TestFaultOutliveClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	const latency = 500 * time.Millisecond
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultOutliveClient, Latency: latency})

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	p := piParams("pm_card_visa", "1", "outlive")
	p.Context = ctx
	start := time.Now()
	_, err := e.sc.PaymentIntents.New(p)
	requireNetworkError(t, err)
	require.Less(t, time.Since(start), latency)

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.ExecutingNow)
	require.EqualValues(t, 1, st.OutliveClients)
	require.Empty(t, e.fake.PaymentIntents())
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "outlive"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusConflict, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeIdempotencyKeyInUse, se.Code)

	require.Eventually(t, func() bool { return e.fake.Stats().ExecutingNow == 0 }, 5*time.Second, 5*time.Millisecond)
	pis := e.fake.PaymentIntents()
	require.Len(t, pis, 1)
	require.Equal(t, stripefake.StatusSucceeded, pis[0].Status)
	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "outlive"))
	require.NoError(t, err)
	require.Equal(t, "true", pi.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, pis[0].ID, pi.ID)

	st = e.fake.Stats()
	require.EqualValues(t, 1, st.ClientsGone)
	require.EqualValues(t, 1, st.KeyInUse)
	require.EqualValues(t, 1, st.PaymentIntentsCreated)
}

// A handler whose request context is already cancelled returns at once but
// the execution still completes and saves; the same holds for latency.
func TestExecutionSurvivesCancelledContext(t *testing.T) {
	t.Parallel()
	for _, kind := range []stripefake.FaultKind{stripefake.FaultOutliveClient, stripefake.FaultLatency} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			fake := stripefake.New(stripefake.Options{})
			const latency = 200 * time.Millisecond
			fake.Inject(stripefake.Fault{Kind: kind, Latency: latency})

			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/payment_intents",
				strings.NewReader("amount=100&currency=usd&payment_method=pm_card_visa&confirm=true"))
			req.Header.Set("Authorization", "Bearer sk_test_1")
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Idempotency-Key", "cancelled")
			rec := httptest.NewRecorder()
			start := time.Now()
			fake.ServeHTTP(rec, req)
			require.Less(t, time.Since(start), latency, "the handler waits for a client that left")
			require.Empty(t, fake.PaymentIntents())

			require.Eventually(t, func() bool { return len(fake.PaymentIntents()) == 1 }, 5*time.Second, 5*time.Millisecond)
			require.Eventually(t, func() bool { return fake.Stats().ExecutingNow == 0 }, 5*time.Second, time.Millisecond)
			require.EqualValues(t, 1, fake.Stats().ClientsGone)

			// Saved: the key replays.
			again := httptest.NewRequest(http.MethodPost, "/v1/payment_intents",
				strings.NewReader("amount=100&currency=usd&payment_method=pm_card_visa&confirm=true"))
			again.Header = req.Header.Clone()
			rec = httptest.NewRecorder()
			fake.ServeHTTP(rec, again)
			require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			require.Equal(t, "true", rec.Header().Get("Idempotent-Replayed"))
			require.Contains(t, rec.Body.String(), fake.PaymentIntents()[0].ID)
		})
	}
}

func TestFaultKindText(t *testing.T) {
	t.Parallel()
	names := map[stripefake.FaultKind]string{
		stripefake.FaultLatency: "latency", stripefake.Fault500: "500", stripefake.FaultLostAnswer: "lost_answer",
		stripefake.FaultHang: "hang", stripefake.Fault500Charged: "500_charged",
		stripefake.FaultIdempotencyError: "idempotency_error", stripefake.FaultOutliveClient: "outlive_client",
	}
	for kind, name := range names {
		b, err := kind.MarshalText()
		require.NoError(t, err)
		require.Equal(t, name, string(b))
		var back stripefake.FaultKind
		require.NoError(t, back.UnmarshalText(b))
		require.Equal(t, kind, back)
	}
	var k stripefake.FaultKind
	require.ErrorContains(t, k.UnmarshalText([]byte("boom")), "outlive_client")
	_, err := stripefake.FaultKind(99).MarshalText()
	require.Error(t, err)
}

// A fault given an Op waits for a write of that kind: writes of other kinds
// pass it by and take the next fault that is theirs, or none.
func TestFaultOpWaitsForItsKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	e.fake.Inject(
		stripefake.Fault{Kind: stripefake.Fault500, Op: stripefake.OpCreateRefund},
		stripefake.Fault{Kind: stripefake.Fault500Charged},
	)

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "op-1"))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	require.Len(t, e.fake.PaymentIntents(), 2, "the 500 that charged, not the refund's")
	require.Equal(t, 1, e.fake.PendingFaults())
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "2", "op-2"))
	require.NoError(t, err, "the refund's fault is not a create's")
	require.Equal(t, 1, e.fake.PendingFaults())

	_, err = e.sc.Refunds.New(refundOf(pi.ID, 100, ""))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	require.Empty(t, e.fake.Refunds())
	require.Equal(t, 0, e.fake.PendingFaults())

	require.Panics(t, func() { e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500, Op: "update_payment_intent"}) })

	// The admin endpoint takes "op" too, and refuses one it does not know.
	code, _ := postJSON(t, e, "/_fake/faults", `{"inject":[{"kind":"500_charged","op":"create_refund"}]}`)
	require.Equal(t, http.StatusOK, code)
	paid(t, e, "pm_card_visa")
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 100, ""))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	require.Len(t, e.fake.Refunds(), 1, "the 500 that did refund")
	code, body := postJSON(t, e, "/_fake/faults", `{"inject":[{"kind":"500","op":"update_payment_intent"}]}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, `unknown op \"update_payment_intent\"`)
	require.Equal(t, 0, e.fake.PendingFaults())

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.Faults500)
	require.EqualValues(t, 2, st.Faults500Charged)
}
