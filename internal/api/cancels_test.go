package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestCancels covers POST /payments/{id}/cancel.
func TestCancels(t *testing.T) {
	t.Parallel()

	setup := func(t *testing.T) (*testutil.Service, string) {
		t.Helper()
		svc := testutil.StartService(t, testutil.ServiceOptions{})
		_, apiKey := svc.NewUser(t)
		return svc, apiKey
	}

	t.Run("CancelReleasesTheAuthorization", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := authorized(t, svc, apiKey, "auth")

		resp := postCancel(t, svc, apiKey, "cancel", p.ID)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		canceled := decode[payment](t, resp)
		require.Equal(t, "canceled", canceled.Status)
		require.Zero(t, canceled.AmountCaptured)
		require.Equal(t, stripefake.StatusCanceled, stripePI(t, svc, *p.StripePaymentIntentID).Status)
		replay := postCancel(t, svc, apiKey, "cancel", p.ID)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(resp.Body), string(replay.Body))

		requireProblem(t, postCancel(t, svc, apiKey, "cancel-2", p.ID), http.StatusBadRequest, "payment-not-cancelable")
		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{}`), http.StatusBadRequest, "payment-not-capturable")
		requireProblem(t, postRefund(t, svc, apiKey, "refund", p.ID, `{}`), http.StatusBadRequest, "payment-not-refundable")
		requireProblem(t, svc.Do(t, http.MethodPost, "/payments/"+p.ID+"/cancel", `{"reason": "x"}`,
			"Authorization", "Bearer "+apiKey, "Idempotency-Key", "bad", "Content-Type", "application/json"),
			http.StatusBadRequest, "invalid-request")
		require.EqualValues(t, 1, svc.Stripe.Stats().CancelRequests)
		require.Zero(t, svc.Stripe.Stats().CaptureRequests)
		require.Zero(t, receipts(t, svc))
	})

	t.Run("AutomaticPaymentIsNotCancelable", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := paid(t, svc, apiKey, "pay")
		require.Equal(t, p.ID, requireProblem(t, postCancel(t, svc, apiKey, "cancel", p.ID), http.StatusBadRequest, "payment-not-cancelable").PaymentID)
		require.Zero(t, svc.Stripe.Stats().CancelRequests)
	})
}

// TestCancelFaults: a cancel whose answer was lost, or that did cancel
// behind a 500, is read back from the PaymentIntent and answers 200 at
// once; one that did not is sent again under the next key.
func TestCancelFaults(t *testing.T) {
	t.Parallel()
	for _, kind := range []stripefake.FaultKind{stripefake.FaultLostAnswer, stripefake.Fault500Charged, stripefake.Fault500} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			svc := testutil.StartService(t, testutil.ServiceOptions{})
			_, apiKey := svc.NewUser(t)
			p := authorized(t, svc, apiKey, "auth")
			svc.Stripe.Inject(stripefake.Fault{Kind: kind, Op: stripefake.OpCancelPaymentIntent})

			resp := postCancel(t, svc, apiKey, "cancel", p.ID)
			if kind == stripefake.Fault500 {
				requireProblem(t, resp, http.StatusServiceUnavailable, "processor-unavailable")
				resp = postCancel(t, svc, apiKey, "cancel", p.ID)
			}
			require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
			require.Equal(t, "canceled", decode[payment](t, resp).Status)
			require.EqualValues(t, 1, svc.Stripe.Stats().Cancels)
			require.Equal(t, stripefake.StatusCanceled, stripePI(t, svc, *p.StripePaymentIntentID).Status)
		})
	}
}
