package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// manualVisa authorizes 2000 on a card that succeeds, to capture later.
const manualVisa = `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "capture_method": "manual"}`

// authorized makes a manual payment of 2000, authorized, and returns it.
func authorized(t *testing.T, svc *testutil.Service, apiKey, key string) payment {
	t.Helper()
	resp := svc.PostPayment(t, apiKey, key, manualVisa)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	return decode[payment](t, resp)
}

// stripePI is the emulator's PaymentIntent id, as it stands.
func stripePI(t *testing.T, svc *testutil.Service, id string) stripefake.PaymentIntent {
	t.Helper()
	for _, pi := range svc.Stripe.PaymentIntents() {
		if pi.ID == id {
			return pi
		}
	}
	t.Fatalf("the emulator has no PaymentIntent %s", id)
	return stripefake.PaymentIntent{}
}

// TestManualPayments covers POST /payments with capture_method manual: the
// authorization, and what it is not yet (charged, refundable, receipted).
func TestManualPayments(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		svc := testutil.StartService(t, testutil.ServiceOptions{})
		_, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey}
	}

	t.Run("AuthorizesWithoutCharging", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		p := authorized(t, svc, bundle.apiKey, "auth")
		require.Equal(t, "requires_capture", p.Status)
		require.Equal(t, "manual", p.CaptureMethod)
		require.Zero(t, p.AmountCaptured)
		require.NotNil(t, p.StripePaymentIntentID)
		pi := stripePI(t, svc, *p.StripePaymentIntentID)
		require.Equal(t, stripefake.StatusRequiresCapture, pi.Status)
		require.Zero(t, pi.AmountReceived)
		require.Zero(t, receipts(t, svc), "the receipt goes out on capture, not on authorization")

		got := getPaymentOf(t, svc, bundle.apiKey, p.ID)
		require.Equal(t, "requires_capture", got["status"])
		require.Equal(t, "manual", got["capture_method"])
		require.EqualValues(t, 0, got["amount_captured"])

		prob := requireProblem(t, postRefund(t, svc, bundle.apiKey, "refund", p.ID, `{}`), http.StatusBadRequest, "payment-not-refundable")
		require.Equal(t, p.ID, prob.PaymentID)
		require.Empty(t, svc.Stripe.Refunds())
	})

	t.Run("AutomaticIsCapturedWhole", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		p := paid(t, svc, bundle.apiKey, "pay")
		require.Equal(t, "succeeded", p.Status)
		require.Equal(t, "automatic", p.CaptureMethod)
		require.EqualValues(t, 2000, p.AmountCaptured)

		// "automatic", sent or not, is one request: the key made without it
		// replays (a key made before manual capture existed, too).
		replay := svc.PostPayment(t, bundle.apiKey, "pay",
			`{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "description": "order 1", "capture_method": "automatic"}`)
		require.Equal(t, http.StatusCreated, replay.Status, "body: %s", replay.Body)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "pay",
			`{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "description": "order 1", "capture_method": "manual"}`),
			http.StatusUnprocessableEntity, "idempotency-key-reused")
		require.Len(t, svc.Stripe.PaymentIntents(), 1)
	})

	t.Run("UnknownCaptureMethodIsRefusedNotStored", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		for _, v := range []string{`"later"`, `"MANUAL"`, `1`} {
			prob := requireProblem(t, svc.PostPayment(t, bundle.apiKey, "bad",
				`{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "capture_method": `+v+`}`),
				http.StatusBadRequest, "invalid-request")
			require.Equal(t, "/capture_method", prob.Errors[0].Pointer)
		}
		require.Empty(t, svc.Stripe.PaymentIntents())
		// Nothing was stored: the key is free for the corrected request.
		require.Equal(t, "requires_capture", authorized(t, svc, bundle.apiKey, "bad").Status)
	})
}
