package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestCaptureEvents covers Stripe's word on an authorization: its
// expiry, and a capture whose outcome only the event tells.
func TestCaptureEvents(t *testing.T) {
	t.Parallel()

	// Stripe cancels an authorization nobody captured within its window;
	// its payment_intent.canceled moves the payment to canceled, and a
	// capture then is refused without a call to Stripe.
	t.Run("ExpiredAuthorizationIsCanceledByTheEvent", func(t *testing.T) {
		t.Parallel()
		svc := webhookRigWith(t, testutil.ServiceOptions{}, stripefake.Options{AuthorizationWindow: time.Hour})
		_, apiKey := svc.NewUser(t)
		p := authorized(t, svc, apiKey, "auth")
		svc.Stripe.Advance(2 * time.Hour)

		testutil.WaitForf(t, 15*time.Second, 10*time.Millisecond, func() bool {
			return getPaymentOf(t, svc, apiKey, p.ID)["status"] == "canceled"
		}, "the payment was not canceled")
		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{}`), http.StatusBadRequest, "payment-not-capturable")
		require.Zero(t, svc.Stripe.Stats().CaptureRequests)
		require.Zero(t, receipts(t, svc))
		require.Equal(t, 1, countEvents(t, svc, "WHERE type = 'payment_intent.canceled' AND outcome = 'applied'"))
	})

	// The capture outlives the client's timeout; read back, the
	// PaymentIntent is still requires_capture, so the outcome is unknown
	// (503). The capture then takes at Stripe, and its
	// payment_intent.succeeded settles the key: the client's retry gets
	// the stored 200, and nothing is sent again.
	t.Run("EventSettlesAnUnknownCapture", func(t *testing.T) {
		t.Parallel()
		svc := webhookRigWith(t, testutil.ServiceOptions{Workers: quietCompleter, StripeTimeout: time.Second}, stripefake.Options{})
		_, apiKey := svc.NewUser(t)
		p := authorized(t, svc, apiKey, "auth")
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultOutliveClient, Op: stripefake.OpCapturePaymentIntent, Latency: 2 * time.Second})

		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{"amount_to_capture": 700}`), http.StatusServiceUnavailable, "processor-unavailable")
		testutil.WaitForf(t, 15*time.Second, 10*time.Millisecond, func() bool {
			var point string
			err := svc.Pool.QueryRow(context.Background(), "SELECT recovery_point FROM idempotency_keys WHERE idempotency_key = 'cap'").Scan(&point)
			return err == nil && point == "finished"
		}, "the event did not finish the key")
		requests := svc.Stripe.Stats().CaptureRequests

		retried := postCapture(t, svc, apiKey, "cap", p.ID, `{"amount_to_capture": 700}`)
		require.Equal(t, http.StatusOK, retried.Status, "body: %s", retried.Body)
		require.Equal(t, "true", retried.Header.Get("Idempotent-Replayed"))
		require.EqualValues(t, 700, decode[payment](t, retried).AmountCaptured)
		require.Equal(t, requests, svc.Stripe.Stats().CaptureRequests, "settled by the event, not sent again")
		require.EqualValues(t, 1, svc.Stripe.Stats().Captures)
		require.Equal(t, 1, receipts(t, svc))
	})

	// An authorization whose answer was lost, never retried:
	// payment_intent.amount_capturable_updated settles its key as
	// authorized, with no receipt.
	t.Run("EventSettlesAnUnknownAuthorization", func(t *testing.T) {
		t.Parallel()
		svc := webhookRigWith(t, testutil.ServiceOptions{Workers: quietCompleter}, stripefake.Options{})
		_, apiKey := svc.NewUser(t)
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer, Op: stripefake.OpCreatePaymentIntent})
		requireProblem(t, svc.PostPayment(t, apiKey, "auth", manualVisa), http.StatusServiceUnavailable, "processor-unavailable")

		testutil.WaitForf(t, 15*time.Second, 10*time.Millisecond, func() bool {
			var point string
			err := svc.Pool.QueryRow(context.Background(), "SELECT recovery_point FROM idempotency_keys WHERE idempotency_key = 'auth'").Scan(&point)
			return err == nil && point == "finished"
		}, "the event did not finish the key")
		retried := svc.PostPayment(t, apiKey, "auth", manualVisa)
		require.Equal(t, http.StatusCreated, retried.Status, "body: %s", retried.Body)
		require.Equal(t, "true", retried.Header.Get("Idempotent-Replayed"))
		require.Equal(t, "requires_capture", decode[payment](t, retried).Status)
		require.Zero(t, receipts(t, svc))
		require.EqualValues(t, 1, svc.Stripe.Stats().CreateRequests)
	})

	// Stripe's payment_intent.succeeded settles the key that claimed the
	// authorization with 200 only when the capture's metadata names that
	// key's intent. Here key cap claimed it and its capture did nothing
	// (a 500), so it is unfinished, when the event of a capture made by
	// another key (cap-lost, whose own commits a failover lost) arrives:
	// cap is finished with its stored 400, the payment is recorded captured
	// by cap-lost's intent, and cap-lost's retry is answered 200.
	t.Run("EventOfAnotherKeysCaptureRefusesTheClaimingKey", func(t *testing.T) {
		t.Parallel()
		svc := testutil.StartService(t, testutil.ServiceOptions{WebhookSecret: whsec, Workers: quietCompleter})
		userID, apiKey := svc.NewUser(t)
		p := authorized(t, svc, apiKey, "auth")
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500, Op: stripefake.OpCapturePaymentIntent})
		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{}`), http.StatusServiceUnavailable, "processor-unavailable")
		// The other key's capture, as Stripe executed it; its key row and
		// its claim are the failover's loss.
		lost := &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(700)}
		for k, v := range captureMetadata(t, svc, userID, "cap-lost") {
			lost.AddMetadata(k, v)
		}
		_, err := stripeClient(&testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL}).PaymentIntents.Capture(*p.StripePaymentIntentID, lost)
		require.NoError(t, err)

		_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+*p.StripePaymentIntentID), time.Now())
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Contains(t, string(resp.Body), `"alarm":false`)
		require.Equal(t, 1, countEvents(t, svc, "WHERE type = 'payment_intent.succeeded' AND outcome = 'applied'"))

		replay := postCapture(t, svc, apiKey, "cap", p.ID, `{}`)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"), "the event finished the key")
		requireProblem(t, replay, http.StatusBadRequest, "payment-not-capturable")
		retried := postCapture(t, svc, apiKey, "cap-lost", p.ID, `{"amount_to_capture": 700}`)
		require.Equal(t, http.StatusOK, retried.Status, "body: %s", retried.Body)
		require.EqualValues(t, 700, decode[payment](t, retried).AmountCaptured)
		require.EqualValues(t, 1, svc.Stripe.Stats().Captures)
		require.Equal(t, 1, receipts(t, svc))
		requireMetric(t, svc, `paymentsd_captures_outside_total{found_by="webhook"} 0`)
	})

	// The event of a capture nobody of ours made (the Dashboard: no
	// capture metadata) is applied, the payment recorded as Stripe says,
	// the claiming key finished with its stored 400, and the event kept as
	// an alarm: logged, and counted twice (the webhook alarm, and captures
	// made outside paymentsd).
	t.Run("EventOfACaptureOutsidePaymentsdRaisesTheAlarm", func(t *testing.T) {
		t.Parallel()
		svc := testutil.StartService(t, testutil.ServiceOptions{WebhookSecret: whsec, Workers: quietCompleter})
		_, apiKey := svc.NewUser(t)
		p := authorized(t, svc, apiKey, "auth")
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500, Op: stripefake.OpCapturePaymentIntent})
		requireProblem(t, postCapture(t, svc, apiKey, "cap", p.ID, `{}`), http.StatusServiceUnavailable, "processor-unavailable")
		_, err := stripeClient(&testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL}).PaymentIntents.Capture(*p.StripePaymentIntentID,
			&stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(1800)})
		require.NoError(t, err)

		_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+*p.StripePaymentIntentID), time.Now())
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Contains(t, string(resp.Body), `"alarm":true`)
		requireMetric(t, svc, `paymentsd_webhook_events_total{outcome="alarm",type="payment_intent.succeeded"} 1`)
		requireMetric(t, svc, `paymentsd_captures_outside_total{found_by="webhook"} 1`)

		replay := postCapture(t, svc, apiKey, "cap", p.ID, `{}`)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"), "the event finished the key")
		requireProblem(t, replay, http.StatusBadRequest, "payment-not-capturable")
		got := getPaymentOf(t, svc, apiKey, p.ID)
		require.Equal(t, "succeeded", got["status"])
		require.EqualValues(t, 1800, got["amount_captured"])
		require.Equal(t, 1, receipts(t, svc))
	})

	// An event older than the payment's state (an authorization's
	// amount_capturable_updated, or its canceled, delivered after the
	// capture was recorded) changes nothing.
	t.Run("OlderEventsNeverOverwrite", func(t *testing.T) {
		t.Parallel()
		svc := testutil.StartService(t, testutil.ServiceOptions{WebhookSecret: whsec})
		_, apiKey := svc.NewUser(t)
		p := authorized(t, svc, apiKey, "auth")
		authorization := stripeObject(t, svc, "/v1/payment_intents/"+*p.StripePaymentIntentID)
		require.Equal(t, http.StatusOK, postCapture(t, svc, apiKey, "cap", p.ID, `{}`).Status)

		_, payload := event("payment_intent.amount_capturable_updated", authorization, time.Now().Add(-time.Minute))
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		canceled := strings.Replace(authorization, `"status":"requires_capture"`, `"status":"canceled"`, 1)
		require.NotEqual(t, authorization, canceled)
		_, payload = event("payment_intent.canceled", canceled, time.Now().Add(-time.Minute))
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)

		got := getPaymentOf(t, svc, apiKey, p.ID)
		require.Equal(t, "succeeded", got["status"])
		require.EqualValues(t, 2000, got["amount_captured"])
		require.Equal(t, 2, countEvents(t, svc, "WHERE outcome = 'ignored'"))
	})
}
