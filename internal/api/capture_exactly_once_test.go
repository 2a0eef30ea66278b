package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// plantAuthorization authorizes amount (capture_method manual) at Stripe,
// outside paymentsd: a PaymentIntent requires_capture that is not the
// payment's.
func plantAuthorization(t *testing.T, em *testutil.Emulator, amount int64, metadata map[string]string) *stripe.PaymentIntent {
	t.Helper()
	params := &stripe.PaymentIntentParams{
		Amount: stripe.Int64(amount), Currency: stripe.String("usd"),
		PaymentMethod: stripe.String("pm_card_visa"), Confirm: stripe.Bool(true),
		CaptureMethod: stripe.String("manual"),
	}
	for k, v := range metadata {
		params.AddMetadata(k, v)
	}
	pi, err := stripeClient(em).PaymentIntents.New(params)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, pi.Status)
	return pi
}

// TestCaptureExactlyOnce reproduces defects of the authorize-now,
// capture-later endpoints: each subtest fails on the code as it stands.
func TestCaptureExactlyOnce(t *testing.T) {
	t.Parallel()

	// Defect: payments.Resolver.Charged checks a manual payment's
	// PaymentIntent in a switch whose first case (requires_capture and
	// capture_method manual) is empty: Go does not fall through, so the
	// amount, currency and intent checks below it never run. An operator
	// settling a parked authorization with the wrong PaymentIntent (another
	// amount, another intent's) is not refused, and the payment records an
	// authorization that is not its own, which a capture then takes.
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, svc *testutil.Service, em *testutil.Emulator, userID int64) *stripe.PaymentIntent
	}{
		{"AnotherAmount", func(t *testing.T, _ *testutil.Service, em *testutil.Emulator, _ int64) *stripe.PaymentIntent {
			return plantAuthorization(t, em, 7, nil) // made by hand: no paymentsd metadata
		}},
		{"AnotherIntent", func(t *testing.T, svc *testutil.Service, em *testutil.Emulator, userID int64) *stripe.PaymentIntent {
			return plantAuthorization(t, em, 2000, intentOf(t, svc, userID, "someone-else").Metadata())
		}},
	} {
		t.Run("OperatorChargedRefusesAnAuthorizationOf"+tc.name, func(t *testing.T) {
			t.Parallel()
			em := testutil.StartEmulator(t, stripefake.Options{})
			svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em})
			userID, apiKey := svc.NewUser(t)
			em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
			requireProblem(t, svc.PostPayment(t, apiKey, "auth", manualVisa), http.StatusServiceUnavailable, "needs-attention")
			wrong := tc.plant(t, svc, em, userID)

			settled, err := svc.App.Resolver.Charged(context.Background(), keyID(t, svc, "auth"), wrong.ID)
			if err == nil {
				t.Logf("accepted: %d %s", settled.Status, settled.Body)
			}
			require.ErrorIs(t, err, payments.ErrResolutionRefused,
				"PaymentIntent %s (%d, metadata %v) is not the payment's authorization of 2000", wrong.ID, wrong.Amount, wrong.Metadata)
		})
	}

	// Defect: a capture that finds the PaymentIntent already captured by
	// someone else (the Dashboard, another integration) with another amount
	// answers 200 as if it had captured: Do treats every
	// payment_intent_unexpected_state as possibly its own earlier capture
	// and adopts whatever the PaymentIntent shows. The client asked for 700
	// and is told its capture succeeded; the customer paid 2000, and no
	// alarm or operator hears of it.
	t.Run("ForeignCaptureOfAnotherAmountIsNotAnsweredAsOurs", func(t *testing.T) {
		t.Parallel()
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em})
		_, apiKey := svc.NewUser(t)
		p := authorized(t, svc, apiKey, "auth")

		// Captured in full outside paymentsd; no webhook reaches it.
		_, err := stripeClient(em).PaymentIntents.Capture(*p.StripePaymentIntentID, &stripe.PaymentIntentCaptureParams{})
		require.NoError(t, err)

		resp := postCapture(t, svc, apiKey, "cap", p.ID, `{"amount_to_capture": 700}`)
		t.Logf("answer: %d %s", resp.Status, resp.Body)
		if resp.Status == http.StatusOK {
			require.EqualValues(t, 700, decode[payment](t, resp).AmountCaptured,
				"told its capture of 700 succeeded, while Stripe captured something else and this request captured nothing")
		}
		require.EqualValues(t, 1, em.Stats().Captures, "one capture at Stripe, not this key's")
	})
}
