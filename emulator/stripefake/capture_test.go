package stripefake_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// manualParams builds confirmed create params with capture_method=manual.
func manualParams(pm, paymentID, key string) *stripe.PaymentIntentParams {
	p := piParams(pm, paymentID, key)
	p.CaptureMethod = stripe.String(string(stripe.PaymentIntentCaptureMethodManual))
	return p
}

// authorized creates a PaymentIntent of 1234 usd authorized on pm_card_visa
// with capture_method=manual.
func authorized(t *testing.T, e *env, paymentID string) *stripe.PaymentIntent {
	t.Helper()
	pi, err := e.sc.PaymentIntents.New(manualParams("pm_card_visa", paymentID, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, pi.Status)
	return pi
}

// capture_method=manual authorizes only; every PaymentIntent shows its
// capture_method, automatic_async unless another was given.
func TestManualCaptureAuthorizes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	pi := authorized(t, e, "m1")
	require.Equal(t, stripe.PaymentIntentCaptureMethodManual, pi.CaptureMethod)
	require.EqualValues(t, 1234, pi.Amount)
	require.EqualValues(t, 1234, pi.AmountCapturable)
	require.Zero(t, pi.AmountReceived)
	require.Zero(t, pi.CanceledAt)
	require.Empty(t, pi.CancellationReason)
	require.NotNil(t, pi.LatestCharge)
	ch := pi.LatestCharge // expanded by piParams
	require.False(t, ch.Captured)
	require.True(t, ch.Paid)
	require.Equal(t, stripe.ChargeStatusSucceeded, ch.Status)
	require.Zero(t, ch.AmountCaptured)
	require.Zero(t, ch.AmountRefunded)
	require.False(t, ch.Refunded)

	got := retrieved(t, e, pi.ID)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, got.Status)
	require.EqualValues(t, 1234, got.AmountCapturable)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, listedStatus(t, e, pi.ID))
	require.Equal(t, []string{pi.ID}, searchedIDs(t, e, "status:'requires_capture'"))

	// Nothing was received, so there is nothing to refund or dispute yet.
	_, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.Equal(t, "charge_not_refundable", string(stripeErr(t, err).Code))
	_, err = e.fake.OpenDispute(pi.ID, "")
	require.Error(t, err)

	// Not confirmed: nothing authorized.
	p := manualParams("pm_card_visa", "m2", "")
	p.Confirm = nil
	unconfirmed, err := e.sc.PaymentIntents.New(p)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresConfirmation, unconfirmed.Status)
	require.Zero(t, unconfirmed.AmountCapturable)
	require.Equal(t, stripe.PaymentIntentCaptureMethodManual, unconfirmed.CaptureMethod)

	// A decline is a decline, manual or not.
	_, err = e.sc.PaymentIntents.New(manualParams("pm_card_chargeDeclined", "m3", ""))
	se := stripeErr(t, err)
	require.Equal(t, stripe.ErrorCodeCardDeclined, se.Code)
	require.Equal(t, stripe.PaymentIntentCaptureMethodManual, se.PaymentIntent.CaptureMethod)
	require.Zero(t, se.PaymentIntent.AmountCapturable)

	auto := paid(t, e, "pm_card_visa")
	require.Equal(t, stripe.PaymentIntentCaptureMethodAutomaticAsync, auto.CaptureMethod)
	require.Zero(t, auto.AmountCapturable)
	require.True(t, auto.LatestCharge.Captured)
	p = piParams("pm_card_visa", "a2", "")
	p.CaptureMethod = stripe.String("automatic")
	explicit, err := e.sc.PaymentIntents.New(p)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, explicit.Status)
	require.Equal(t, stripe.PaymentIntentCaptureMethodAutomatic, explicit.CaptureMethod)

	// Another capture_method is a validation failure: nothing is made.
	code, _, body := rawDo(t, e, http.MethodPost, "/v1/payment_intents", "Bearer sk_test_123", nil,
		piForm(url.Values{"capture_method": {"later"}}))
	require.Equal(t, http.StatusBadRequest, code)
	se2 := errorOf(t, body)
	require.Equal(t, "capture_method", se2.Param)
	require.Equal(t, "Invalid capture_method: must be one of automatic, automatic_async, or manual", se2.Msg)

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.Authorizations)
	require.EqualValues(t, 5, st.PaymentIntentsCreated)
}

// A processing PaymentIntent with manual capture that goes through is
// authorized, not captured.
func TestProcessingManualCaptureIsAuthorized(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi, err := e.sc.PaymentIntents.New(manualParams("pm_card_processing", "p1", ""))
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusProcessing, pi.Status)
	require.Zero(t, pi.AmountCapturable)

	got, err := e.fake.SetPaymentIntentStatus(pi.ID, stripefake.StatusSucceeded, "")
	require.NoError(t, err)
	require.Equal(t, stripefake.StatusRequiresCapture, got.Status)
	require.EqualValues(t, 1234, got.AmountCapturable)
	require.Zero(t, got.AmountReceived)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, retrieved(t, e, pi.ID).Status)
	require.EqualValues(t, 1, e.fake.Stats().Authorizations)
}
