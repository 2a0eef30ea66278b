package stripefake_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

func TestRefundIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")

	first, err := e.sc.Refunds.New(refundOf(pi.ID, 300, "refund-key"))
	require.NoError(t, err)
	require.Empty(t, first.LastResponse.Header.Get("Idempotent-Replayed"))
	again, err := e.sc.Refunds.New(refundOf(pi.ID, 300, "refund-key"))
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, "true", again.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, first.LastResponse.RequestID, again.LastResponse.Header.Get("Original-Request"))
	require.Equal(t, string(first.LastResponse.RawJSON), string(again.LastResponse.RawJSON))
	require.Len(t, e.fake.Refunds(), 1)
	require.EqualValues(t, 300, charge(t, e, pi.ID).AmountRefunded)

	// Other parameters with the same key.
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 400, "refund-key"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
	require.Contains(t, se.Msg, "same parameters")

	// A key first used for a PaymentIntent, then for a refund, and back.
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "x", "shared-key"))
	require.NoError(t, err)
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 100, "shared-key"))
	se = stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
	require.Equal(t, "Keys for idempotent requests can only be used for the same endpoint they were first used for "+
		"('/v1/refunds' vs '/v1/payment_intents'). Try using a key other than 'shared-key' if you meant to execute "+
		"a different request.", se.Msg)
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 100, "refund-only"))
	require.NoError(t, err)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "x", "refund-only"))
	require.Contains(t, stripeErr(t, err).Msg, "('/v1/payment_intents' vs '/v1/refunds')")

	// Keys are scoped per API key.
	other, err := newClient(e.srv, "sk_test_other").Refunds.New(refundOf(pi.ID, 300, "refund-key"))
	require.NoError(t, err)
	require.NotEqual(t, first.ID, other.ID)

	st := e.fake.Stats()
	require.EqualValues(t, 3, st.IdempotencyErrors)
	require.EqualValues(t, 1, st.Replays)
	require.EqualValues(t, 3, st.RefundsCreated)
}

func TestRefundKeyInUseWhileHung(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultHang})

	type result struct {
		rf  *stripe.Refund
		err error
	}
	done := make(chan result, 1)
	go func() {
		rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "hung-refund"))
		done <- result{rf, err}
	}()
	require.Eventually(t, func() bool { return e.fake.Stats().HungNow == 1 }, 5*time.Second, time.Millisecond)

	_, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "hung-refund"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusConflict, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeIdempotencyKeyInUse, se.Code)
	require.Empty(t, e.fake.Refunds())

	e.fake.ReleaseHangs()
	r := <-done
	require.NoError(t, r.err)
	require.EqualValues(t, 1234, r.rf.Amount)
	again, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "hung-refund"))
	require.NoError(t, err)
	require.Equal(t, r.rf.ID, again.ID)
	require.Equal(t, "true", again.LastResponse.Header.Get("Idempotent-Replayed"))
	require.EqualValues(t, 1, e.fake.Stats().KeyInUse)
}

func TestRefundFault500(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500})

	_, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "r500"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeAPI, se.Type)
	require.Empty(t, e.fake.Refunds())
	require.EqualValues(t, 0, charge(t, e, pi.ID).AmountRefunded)

	_, err = e.sc.Refunds.New(refundOf(pi.ID, 0, "r500"))
	require.Equal(t, "true", stripeErr(t, err).LastResponse.Header.Get("Idempotent-Replayed"))
	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "r500-new"))
	require.NoError(t, err)
	require.EqualValues(t, 1234, rf.Amount)
	require.EqualValues(t, 1, e.fake.Stats().Faults500)
}

// The indeterminate 500 on a refund: the money went back, the answer says
// otherwise, and the key replays the 500.
func TestRefundFault500Charged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged})

	_, err := e.sc.Refunds.New(refundOf(pi.ID, 1000, "r500c"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode)
	rfs := e.fake.Refunds()
	require.Len(t, rfs, 1)
	require.EqualValues(t, 1000, rfs[0].Amount)
	require.Equal(t, stripefake.RefundSucceeded, rfs[0].Status)
	require.Equal(t, "r500c", rfs[0].IdempotencyKey)
	require.EqualValues(t, 1000, charge(t, e, pi.ID).AmountRefunded)

	_, err = e.sc.Refunds.New(refundOf(pi.ID, 1000, "r500c"))
	replay := stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, replay.HTTPStatusCode)
	require.Equal(t, "true", replay.LastResponse.Header.Get("Idempotent-Replayed"))

	// A retry under a new key is a second refund, refused here because
	// the first already took most of the charge.
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 1000, "r500c-new"))
	require.Equal(t, stripe.ErrorCodeAmountTooLarge, stripeErr(t, err).Code)

	// The refund is real: retrieve finds it.
	got, err := e.sc.Refunds.Get(rfs[0].ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusSucceeded, got.Status)
	require.EqualValues(t, 1, e.fake.Stats().Faults500Charged)
}

func TestRefundFaultLostAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer})

	_, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "rlost"))
	requireNetworkError(t, err)
	rfs := e.fake.Refunds()
	require.Len(t, rfs, 1)

	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "rlost"))
	require.NoError(t, err)
	require.Equal(t, rfs[0].ID, rf.ID)
	require.Equal(t, "true", rf.LastResponse.Header.Get("Idempotent-Replayed"))
	require.EqualValues(t, 1, e.fake.Stats().LostAnswers)
}

func TestRefundFaultIdempotencyError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})

	_, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "ridem"))
	se := stripeErr(t, err)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
	require.Contains(t, se.Msg, "'ridem'")
	require.Empty(t, e.fake.Refunds())

	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "ridem"))
	require.NoError(t, err)
	require.Empty(t, rf.LastResponse.Header.Get("Idempotent-Replayed"))
	require.EqualValues(t, 1, e.fake.Stats().FaultsIdempotencyError)
}

// outlive_client and latency: the client gives up, the refund is made and
// saved anyway; meanwhile the key is in use.
func TestRefundOutlivesClient(t *testing.T) {
	t.Parallel()
	for _, kind := range []stripefake.FaultKind{stripefake.FaultOutliveClient, stripefake.FaultLatency} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, stripefake.Options{})
			pi := paid(t, e, "pm_card_visa")
			const latency = 400 * time.Millisecond
			e.fake.Inject(stripefake.Fault{Kind: kind, Latency: latency})

			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			p := refundOf(pi.ID, 0, "routlive")
			p.Context = ctx
			_, err := e.sc.Refunds.New(p)
			requireNetworkError(t, err)
			require.Empty(t, e.fake.Refunds())
			_, err = e.sc.Refunds.New(refundOf(pi.ID, 0, "routlive"))
			require.Equal(t, stripe.ErrorCodeIdempotencyKeyInUse, stripeErr(t, err).Code)

			require.Eventually(t, func() bool { return e.fake.Stats().ExecutingNow == 0 }, 5*time.Second, 5*time.Millisecond)
			require.Len(t, e.fake.Refunds(), 1)
			rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "routlive"))
			require.NoError(t, err)
			require.Equal(t, "true", rf.LastResponse.Header.Get("Idempotent-Replayed"))
			require.Equal(t, e.fake.Refunds()[0].ID, rf.ID)
			require.EqualValues(t, 1, e.fake.Stats().ClientsGone)
		})
	}
}

// PaymentIntent and refund creates take injected faults from one queue, in
// request order; chaos draws for both.
func TestRefundsShareTheFaultQueueAndChaos(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{Seed: 3})
	pi := paid(t, e, "pm_card_visa")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500}, stripefake.Fault{Kind: stripefake.Fault500Charged})

	_, err := e.sc.Refunds.New(refundOf(pi.ID, 100, ""))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "2", ""))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	require.Equal(t, 0, e.fake.PendingFaults())
	require.Empty(t, e.fake.Refunds())
	require.Len(t, e.fake.PaymentIntents(), 2)

	// Validation failures take no fault.
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500})
	_, err = e.sc.Refunds.New(&stripe.RefundParams{Amount: stripe.Int64(1)})
	require.Equal(t, http.StatusBadRequest, stripeErr(t, err).HTTPStatusCode)
	require.Equal(t, 1, e.fake.PendingFaults())
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 100, ""))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)

	e.fake.SetChaos(stripefake.Chaos{P500: 1})
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 100, ""))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	e.fake.SetChaos(stripefake.Chaos{})
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 100, ""))
	require.NoError(t, err)
	require.EqualValues(t, 3, e.fake.Stats().Faults500)
}
