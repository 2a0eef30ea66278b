package stripefake_test

import (
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

	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	if err == nil {
		t.Fatalf("dispute %s (needs_response, is_charge_refundable false) took PaymentIntent %s's 1234 back from the account; "+
			"the emulator refunded it again with Refund %s (%s for %d): the customer is paid back twice, where Stripe answers charge_disputed",
			d.ID, pi.ID, rf.ID, rf.Status, rf.Amount)
	}
	require.Equal(t, stripe.ErrorCode("charge_disputed"), stripeErr(t, err).Code)
}
