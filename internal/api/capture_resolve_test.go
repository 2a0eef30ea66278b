package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/stripeonce"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestCaptureResolve covers `paymentsd keys resolve` on capture and cancel
// keys: a key parked after every Stripe key did nothing is settled by an
// operator, checked against the PaymentIntent first.
func TestCaptureResolve(t *testing.T) {
	t.Parallel()

	// park makes key's capture (or cancel) of p await an operator: every
	// Stripe key answers a 500 that did nothing, until none is left.
	park := func(t *testing.T, svc *testutil.Service, apiKey, action, key string, p payment) {
		t.Helper()
		op := stripefake.OpCapturePaymentIntent
		if action == "cancel" {
			op = stripefake.OpCancelPaymentIntent
		}
		for range stripeonce.MaxAttempts {
			svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500, Op: op})
		}
		send := func() *testutil.Response {
			if action == "cancel" {
				return postCancel(t, svc, apiKey, key, p.ID)
			}
			return postCapture(t, svc, apiKey, key, p.ID, `{}`)
		}
		for range stripeonce.MaxAttempts {
			requireProblem(t, send(), http.StatusServiceUnavailable, "processor-unavailable")
		}
		requireProblem(t, send(), http.StatusServiceUnavailable, "needs-attention")
		require.Zero(t, svc.Stripe.PendingFaults())
	}

	setup := func(t *testing.T) (*testutil.Service, string) {
		t.Helper()
		svc := testutil.StartService(t, testutil.ServiceOptions{Workers: quietCompleter})
		_, apiKey := svc.NewUser(t)
		return svc, apiKey
	}

	t.Run("NotChargedReleasesTheAuthorization", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := authorized(t, svc, apiKey, "auth")
		park(t, svc, apiKey, "capture", "cap", p)

		_, err := svc.App.Resolve(context.Background(), keyID(t, svc, "cap"), *p.StripePaymentIntentID)
		require.ErrorIs(t, err, payments.ErrResolutionRefused, "the PaymentIntent was not captured")
		settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "cap"), "")
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, settled.Status)
		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{}`), http.StatusBadRequest, "payment-not-capturable")

		// The claim is released: another key captures.
		resp := postCapture(t, svc, apiKey, "cap-2", p.ID, `{}`)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.EqualValues(t, 1, svc.Stripe.Stats().Captures)
	})

	// The key's own capture took after all (a request of its last run that
	// Stripe executed late, past every read-back): its metadata names the
	// key's intent, so the operator's "captured" answers the key 200.
	t.Run("ChargedRecordsTheKeysOwnCapture", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := authorized(t, svc, apiKey, "auth")
		other := authorized(t, svc, apiKey, "auth-2")
		park(t, svc, apiKey, "capture", "cap", p)
		late := &stripe.PaymentIntentCaptureParams{}
		for k, v := range captureMetadata(t, svc, userOfKey(t, svc, "cap"), "cap") {
			late.AddMetadata(k, v)
		}
		_, err := stripeClient(&testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL}).PaymentIntents.Capture(*p.StripePaymentIntentID, late)
		require.NoError(t, err)

		_, err = svc.App.Resolve(context.Background(), keyID(t, svc, "cap"), "")
		require.ErrorIs(t, err, payments.ErrResolutionRefused, "it was captured")
		_, err = svc.App.Resolve(context.Background(), keyID(t, svc, "cap"), *other.StripePaymentIntentID)
		require.ErrorIs(t, err, payments.ErrResolutionRefused, "not this payment's PaymentIntent")
		settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "cap"), *p.StripePaymentIntentID)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, settled.Status)

		replay := postCapture(t, svc, apiKey, "cap", p.ID, `{}`)
		require.Equal(t, http.StatusOK, replay.Status, "body: %s", replay.Body)
		require.EqualValues(t, 2000, decode[payment](t, replay).AmountCaptured)
		require.Equal(t, 1, receipts(t, svc))
		requireMetric(t, svc, `paymentsd_captures_outside_total{found_by="operator"} 0`)
	})

	// Captured by hand (the Dashboard, say) while the key was parked: the
	// operator's "captured" records the payment as Stripe says, with its
	// receipt, but the key's request captured nothing, so it answers its
	// stored 400; and the capture nobody of ours made raises the alarm.
	t.Run("ChargedByHandIsRecordedButNotAnsweredAsTheKeys", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := authorized(t, svc, apiKey, "auth")
		park(t, svc, apiKey, "capture", "cap", p)
		_, err := stripeClient(&testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL}).PaymentIntents.Capture(*p.StripePaymentIntentID,
			&stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(1800)})
		require.NoError(t, err)

		settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "cap"), *p.StripePaymentIntentID)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, settled.Status, "body: %s", settled.Body)
		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{}`), http.StatusBadRequest, "payment-not-capturable")
		got := getPaymentOf(t, svc, apiKey, p.ID)
		require.Equal(t, "succeeded", got["status"])
		require.EqualValues(t, 1800, got["amount_captured"])
		require.Equal(t, 1, receipts(t, svc))
		requireMetric(t, svc, `paymentsd_captures_outside_total{found_by="operator"} 1`)
	})

	// Lock order. A webhook about the payment locks it, then the key that
	// claimed it (ClaimForEvent); keys resolve locked the key, then the
	// payment. Met, the two deadlocked, and Postgres aborted one of them
	// after deadlock_timeout. Resolve now locks the payment first, so it
	// waits for the webhook's transaction holding nothing that one needs.
	t.Run("ResolveLocksThePaymentBeforeTheKeyAsAWebhookDoes", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := authorized(t, svc, apiKey, "auth")
		park(t, svc, apiKey, "capture", "cap", p)
		id := keyID(t, svc, "cap")

		// Still requires_capture at Stripe: resolved as not captured.
		require.NoError(t, resolveBehindAWebhook(t, svc, id,
			`SELECT 1 FROM payments WHERE capture_key_id = $1 FOR UPDATE`, "%PaymentLockForCapture%"))
		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{}`), http.StatusBadRequest, "payment-not-capturable")
	})

	t.Run("CancelKeyNotChargedAfterStripeCanceled", func(t *testing.T) {
		t.Parallel()
		svc, apiKey := setup(t)
		p := authorized(t, svc, apiKey, "auth")
		park(t, svc, apiKey, "cancel", "cancel", p)
		_, err := stripeClient(&testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL}).PaymentIntents.Cancel(*p.StripePaymentIntentID, nil)
		require.NoError(t, err)

		settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "cancel"), "")
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, settled.Status)
		replay := postCancel(t, svc, apiKey, "cancel", p.ID)
		require.Equal(t, "canceled", decode[payment](t, replay).Status)
	})
}
