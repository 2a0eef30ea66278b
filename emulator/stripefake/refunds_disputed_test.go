package stripefake_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// TestRefundOfAChargedBackChargeIsRefused: a charge whose dispute says
// is_charge_refundable false (a chargeback, needs_response: the money has
// left the account already) cannot be refunded. Stripe answers a 400
// invalid_request_error with code charge_disputed ("The charge you're
// attempting to refund has been charged back."). The emulator shows the
// dispute as not refundable and refunds the charge all the same: paymentsd
// then tells a client "refunded" where Stripe's answer would have been a
// stored refusal, and a customer would be paid back twice (chargeback and
// refund).
func TestRefundOfAChargedBackChargeIsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	d, err := e.fake.OpenDispute(pi.ID, "")
	require.NoError(t, err)
	require.Equal(t, stripefake.DisputeStatusNeedsResponse, d.Status, "its charge.dispute.created says is_charge_refundable false")

	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "k1"))
	if err == nil {
		t.Fatalf("dispute %s (needs_response, is_charge_refundable false) took PaymentIntent %s's 1234 back from the account; "+
			"the emulator refunded it again with Refund %s (%s for %d): the customer is paid back twice, where Stripe answers charge_disputed",
			d.ID, pi.ID, rf.ID, rf.Status, rf.Amount)
	}
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
	require.Equal(t, stripe.ErrorCode("charge_disputed"), se.Code)
	require.Empty(t, se.Param)
	require.Equal(t, "Charge "+pi.LatestCharge.ID+" has been charged back; cannot issue a refund.", se.Msg)

	// Executed, so saved like other 400s: the key replays the refusal.
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 0, "k1"))
	replay := stripeErr(t, err)
	require.Equal(t, "true", replay.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, se.Msg, replay.Msg)

	// Any amount is refused, and nothing moved.
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 1, ""))
	require.Equal(t, stripe.ErrorCode("charge_disputed"), stripeErr(t, err).Code)
	require.Empty(t, e.fake.Refunds())
	ch := charge(t, e, pi.ID)
	require.Zero(t, ch.AmountRefunded)
	require.True(t, ch.Disputed)
	require.EqualValues(t, 2, e.fake.Stats().RefundsRefused, "the replay is not executed again")
}
