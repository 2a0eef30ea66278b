package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/db"
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

// TestCaptureExactlyOnce holds the reproductions of an adversarial review of
// the authorize-now, capture-later endpoints (who is credited with a
// capture, and which amounts are reported); each subtest failed on the code
// before its fix.
func TestCaptureExactlyOnce(t *testing.T) {
	t.Parallel()

	// Defect: payments.Resolver.Charged checked a manual payment's
	// PaymentIntent in a switch whose first case (requires_capture and
	// capture_method manual) was empty: Go does not fall through, so the
	// amount, currency and intent checks below it never ran. An operator
	// settling a parked authorization with the wrong PaymentIntent (another
	// amount, another intent's) was not refused, and the payment recorded
	// an authorization not its own, which a capture then took. Every check
	// now applies to every payment (chargeOf).
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

			// The guards refuse only what is wrong: an authorization of
			// the payment's amount, with no other intent's metadata, is
			// its charge.
			right := plantAuthorization(t, em, 2000, nil)
			settled, err = svc.App.Resolver.Charged(context.Background(), keyID(t, svc, "auth"), right.ID)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
			replay := decode[payment](t, svc.PostPayment(t, apiKey, "auth", manualVisa))
			require.Equal(t, payments.StatusRequiresCapture, replay.Status)
			require.Equal(t, right.ID, *replay.StripePaymentIntentID)
		})
	}

	// Defect: a capture that found the PaymentIntent already captured by
	// someone else (the Dashboard, another integration) with another amount
	// answered 200 as if it had captured: Do treated every
	// payment_intent_unexpected_state as possibly its own earlier capture
	// and adopted whatever the PaymentIntent showed. The client asked for
	// 700 and was told its capture succeeded; the customer paid 2000, and
	// no alarm or operator heard of it. A capture now names its key's
	// intent in the PaymentIntent's metadata, and a key is answered only
	// its own: this one stores its 400, the payment is recorded as Stripe
	// says, and a capture with no such metadata raises the alarm.
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

		requireProblem(t, resp, http.StatusBadRequest, "payment-not-capturable")
		replay := postCapture(t, svc, apiKey, "cap", p.ID, `{"amount_to_capture": 700}`)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"), "the 400 is stored")
		requireProblem(t, replay, http.StatusBadRequest, "payment-not-capturable")
		got := getPaymentOf(t, svc, apiKey, p.ID)
		require.Equal(t, "succeeded", got["status"], "recorded as Stripe says")
		require.EqualValues(t, 2000, got["amount_captured"])
		require.Equal(t, 1, receipts(t, svc))
		requireMetric(t, svc, `paymentsd_captures_outside_total{found_by="capture"} 1`)
	})

	// Defect: the same adoption, reached by paymentsd's own capture once a
	// failover to an asynchronous standby lost its commits (design §6): key
	// cap-1 captured 700 and was told 200; the commits that claimed and
	// recorded it are lost, so the payment reads requires_capture again. A
	// second key, cap-2 (the whole authorization), claimed it, got
	// payment_intent_unexpected_state, read the PaymentIntent back
	// (succeeded, 700) and answered 200 as if it had captured; cap-1's
	// retry then got a stored 400 payment-not-capturable for the money it
	// moved. Now the read-back's capture metadata names cap-1: cap-2
	// records the capture as cap-1's and stores its 400, and cap-1's retry
	// finds the payment captured by its own intent and is answered 200.
	t.Run("CaptureAfterLostCommitsIsNotClaimedByAnotherKey", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		svc := testutil.StartService(t, testutil.ServiceOptions{Workers: quietCompleter})
		_, apiKey := svc.NewUser(t)
		p := authorized(t, svc, apiKey, "auth")

		first := postCapture(t, svc, apiKey, "cap-1", p.ID, `{"amount_to_capture": 700}`)
		require.Equal(t, http.StatusOK, first.Status, "body: %s", first.Body)

		// The failover loses the capture's two commits: the key, the claim
		// and the recorded capture, its receipt and its audit.
		require.NoError(t, db.WithTx(ctx, svc.Pool, func(ctx context.Context, tx db.Tx) error {
			_, err := tx.Exec(ctx, `
				UPDATE payments SET status = 'requires_capture', amount_captured = 0, capture_key_id = NULL, capture_attempt = 1;
				DELETE FROM receipt_outbox;
				DELETE FROM receipts;
				DELETE FROM audit_records WHERE action = 'payment.captured';
				DELETE FROM idempotency_keys WHERE idempotency_key = 'cap-1';`)
			return err
		}))

		second := postCapture(t, svc, apiKey, "cap-2", p.ID, `{}`)
		retried := postCapture(t, svc, apiKey, "cap-1", p.ID, `{"amount_to_capture": 700}`)
		t.Logf("cap-2 (whole): %d %s", second.Status, second.Body)
		t.Logf("cap-1 retried: %d %s", retried.Status, retried.Body)
		require.EqualValues(t, 1, svc.Stripe.Stats().Captures)
		assert.NotEqual(t, http.StatusOK, second.Status, "cap-2 captured nothing, yet is told its capture succeeded")
		assert.Equal(t, http.StatusOK, retried.Status, "cap-1's capture is the one Stripe executed")

		requireProblem(t, second, http.StatusBadRequest, "payment-not-capturable")
		require.EqualValues(t, 700, decode[payment](t, retried).AmountCaptured)
		require.Equal(t, "succeeded", decode[payment](t, retried).Status)
		again := postCapture(t, svc, apiKey, "cap-1", p.ID, `{"amount_to_capture": 700}`)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(retried.Body), string(again.Body))
		require.Equal(t, 1, receipts(t, svc), "one receipt, recorded with the capture")
		requireMetric(t, svc, `paymentsd_captures_outside_total{found_by="capture"} 0`)
	})

	// Defect: the receipt of a partial capture stated the amount
	// authorized, not the amount captured: the outbox delivery
	// (ReceiptOutboxClaim) and the recorded receipt (ReceiptsRecord) both
	// read payments.amount. The customer authorized 2000, was charged 700,
	// and was sent a receipt for 2000. Both read amount_captured now.
	t.Run("ReceiptOfAPartialCaptureStatesWhatWasCaptured", func(t *testing.T) {
		t.Parallel()
		svc := testutil.StartService(t, testutil.ServiceOptions{})
		_, apiKey := svc.NewUser(t)
		p := authorized(t, svc, apiKey, "auth")

		resp := postCapture(t, svc, apiKey, "cap", p.ID, `{"amount_to_capture": 700}`)
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.EqualValues(t, 700, decode[payment](t, resp).AmountCaptured)

		var amount int64
		testutil.WaitForf(t, 15*time.Second, 20*time.Millisecond, func() bool {
			return svc.Pool.QueryRow(context.Background(), "SELECT amount FROM receipts").Scan(&amount) == nil
		}, "the receipt was never delivered")
		require.EqualValues(t, 700, amount, "the receipt must state what was captured, not what was authorized")
	})
}
