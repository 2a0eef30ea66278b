package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestWebhookAlarms covers the events POST /webhooks/stripe keeps as alarms
// for an operator: money Stripe moved that the database cannot account for.
func TestWebhookAlarms(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		em     *testutil.Emulator
		userID int64
	}

	// setup starts an emulator, a service that takes its webhooks with the
	// completer quiet, and a user of it.
	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, em: em, userID: userID}
	}

	// A key parked because its intent has two succeeded PaymentIntents is a
	// double charge that an operator must see: neither PaymentIntent's event
	// settles it, both are kept as alarms, and the gauge keeps counting it.
	t.Run("WebhookNeverSettlesAKeyParkedForAConflict", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		first, second := chargedTwice(t, bundle.em, svc, bundle.userID, bundle.apiKey, "twice")
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "twice", visa), http.StatusServiceUnavailable, "needs-attention")
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		for _, pi := range []*stripe.PaymentIntent{first, second} {
			_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+pi.ID), time.Now())
			resp := deliver(t, svc, payload, whsec, time.Now())
			require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
			require.Contains(t, string(resp.Body), `"alarm":true`)
		}
		require.Equal(t, []string{"alarm", "alarm"}, eventOutcomes(t, svc))
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
		requireMetric(t, svc, `paymentsd_webhook_events_total{outcome="alarm",type="payment_intent.succeeded"} 2`)
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "twice", visa), http.StatusServiceUnavailable, "needs-attention")
		var status string
		require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT status FROM payments").Scan(&status))
		require.Equal(t, "pending", status, "the event changed nothing")
		require.Zero(t, receipts(t, svc))
	})

	// A payment an operator recorded as not charged whose PaymentIntent then
	// succeeds: the customer was charged. The event is an alarm, and the key
	// goes back to the operator, so that a retry is told to wait rather than
	// "not charged" (and pay again under a new key); the operator then settles
	// it as charged.
	t.Run("WebhookChargeOfAPaymentRecordedNotChargedGoesBackToTheOperator", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		bundle.em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", visa), http.StatusServiceUnavailable, "needs-attention")
		id := keyID(t, svc, "late")
		_, err := svc.App.Resolver.NotCharged(context.Background(), id)
		require.NoError(t, err)
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", visa), http.StatusBadRequest, "payment-rejected")

		pi := plant(t, bundle.em, 2000, intentOf(t, svc, bundle.userID, "late").Metadata())
		_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+pi.ID), time.Now())
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		require.Equal(t, []string{"alarm"}, eventOutcomes(t, svc))
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
		p := requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", visa), http.StatusServiceUnavailable, "needs-attention")
		require.Contains(t, p.Detail, "operator")

		_, err = svc.App.Resolver.NotCharged(context.Background(), id)
		require.Error(t, err, "Stripe shows the charge")
		settled, err := svc.App.Resolver.Charged(context.Background(), id, pi.ID)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status)
		replay := svc.PostPayment(t, bundle.apiKey, "late", visa)
		require.Equal(t, http.StatusCreated, replay.Status, "body: %s", replay.Body)
		require.Equal(t, pi.ID, *decode[payment](t, replay).StripePaymentIntentID)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	})

	// A refund an operator settled as not refunded has no Stripe id; a late
	// refund.updated (failed) for the Refund Stripe did make moves no money:
	// the reservation was given back once, by the operator.
	t.Run("WebhookLateFailedRefundGivesItsAmountBackOnce", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")
		bundle.em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "lost", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
		_, err := svc.App.Resolve(context.Background(), keyID(t, svc, "lost"), "")
		require.NoError(t, err)
		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		inFlight := postRefund(t, svc, bundle.apiKey, "in-flight", p.ID, `{"amount": 1000}`)
		require.Equal(t, http.StatusCreated, inFlight.Status, "body: %s", inFlight.Body)
		amounts := func() (reserved, refunded int64) {
			require.NoError(t, svc.Pool.QueryRow(context.Background(),
				"SELECT amount_reserved, amount_refunded FROM payments WHERE id = $1", rowID(t, svc, p.ID)).Scan(&reserved, &refunded))
			return reserved, refunded
		}
		reserved, _ := amounts()
		require.EqualValues(t, 1000, reserved)

		// The Refund the lost request made after all, which then failed.
		params := &stripe.RefundParams{PaymentIntent: p.StripePaymentIntentID, Amount: stripe.Int64(600)}
		for k, v := range intentOf(t, svc, bundle.userID, "lost").Metadata() {
			params.AddMetadata(k, v)
		}
		late, err := stripeClient(bundle.em).Refunds.New(params)
		require.NoError(t, err)
		_, err = bundle.em.SetRefundStatus(late.ID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
		require.NoError(t, err)
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+late.ID), time.Now())
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		reserved, refunded := amounts()
		require.EqualValues(t, 1000, reserved, "the 1000 in flight stays reserved")
		require.Zero(t, refunded)
	})

	// An event that cannot be applied, however often it is delivered, is kept
	// as an alarm and answered 200: never a 500 for Stripe to redeliver for
	// ever.
	t.Run("WebhookThatCannotApplyIsAnAlarmNotA500", func(t *testing.T) {
		t.Parallel()
		svc, _ := setup(t)
		_, payload := event("payment_intent.succeeded", `{"id":"pi_odd","object":"payment_intent","amount":"a lot"}`, time.Now())
		for range 2 {
			resp := deliver(t, svc, payload, whsec, time.Now())
			require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		}
		require.Equal(t, []string{"alarm"}, eventOutcomes(t, svc))
	})

	// Two PaymentIntents of one intent both succeed, and the first one's event
	// settles the key while its outcome is merely unknown. The second one's
	// event finds no payment by its id (the payment records the first), yet it
	// is this deployment's and took money: an alarm, not "ignored".
	t.Run("WebhookSecondPaymentIntentOfASettledPaymentIsAnAlarm", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		first, second := chargedTwice(t, bundle.em, svc, bundle.userID, bundle.apiKey, "twice")

		_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+first.ID), time.Now())
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		_, payload = event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+second.ID), time.Now())
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status)

		var reason string
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT coalesce(reason, '') FROM stripe_events ORDER BY received_at DESC, id DESC LIMIT 1").Scan(&reason))
		require.Equal(t, []string{"applied", "alarm"}, eventOutcomes(t, svc),
			"the second charge of one payment must be an alarm; it was recorded with reason %q (answer %s)", reason, resp.Body)
	})

	// A second PaymentIntent of a charged payment's intent succeeds (made by a
	// lost send, a missed lookup, the dashboard): an alarm.
	t.Run("WebhookSecondChargeOfAChargedPaymentIsAnAlarm", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "once")
		extra := plant(t, bundle.em, 2000, intentOf(t, svc, bundle.userID, "once").Metadata())
		require.NotEqual(t, *p.StripePaymentIntentID, extra.ID)
		_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+extra.ID), time.Now())
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, string(resp.Body), `"alarm":true`, "a second succeeded PaymentIntent of a charged payment")
	})

	// A declined payment records its declined PaymentIntent; a second
	// PaymentIntent of its intent then succeeds. The event is an alarm for
	// the operator, never "ignored" (it finds the declined payment by its
	// intent, migration 00024, and hands its key to the operator:
	// TestWebhookAlarmsAfterReaping).
	t.Run("WebhookChargeOfADeclinedPaymentByAnotherPaymentIntentIsAnAlarm", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		declined := `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_chargeDeclined"}`
		first := svc.PostPayment(t, bundle.apiKey, "declined", declined)
		require.Equal(t, http.StatusPaymentRequired, first.Status, "body: %s", first.Body)

		charged := plant(t, bundle.em, 2000, intentOf(t, svc, bundle.userID, "declined").Metadata())
		_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+charged.ID), time.Now())
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, string(resp.Body), `"alarm":true`, "PaymentIntent %s of this intent took the money", charged.ID)
		requireMetric(t, svc, `paymentsd_webhook_events_total{outcome="alarm",type="payment_intent.succeeded"} 1`)
	})

	// Found after 250b7b4: a refund an operator settled as not refunded whose
	// Refund Stripe then made and succeeded was only an alarm; its key kept
	// answering "not refunded", which invites a second refund under a new
	// key. The key now goes back to the operator, who settles it as refunded
	// by that Refund, and the payment counts the money again.
	t.Run("WebhookLateRefundOfANotRefundedKeyGoesBackToTheOperator", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")
		bundle.em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "lost", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
		id := keyID(t, svc, "lost")
		_, err := svc.App.Resolve(context.Background(), id, "")
		require.NoError(t, err)
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "lost", p.ID, `{"amount": 600}`), http.StatusBadRequest, "refund-rejected")

		// The Refund the lost request made after all; it succeeded.
		params := &stripe.RefundParams{PaymentIntent: p.StripePaymentIntentID, Amount: stripe.Int64(600)}
		for k, v := range intentOf(t, svc, bundle.userID, "lost").Metadata() {
			params.AddMetadata(k, v)
		}
		late, err := stripeClient(bundle.em).Refunds.New(params)
		require.NoError(t, err)
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+late.ID), time.Now())
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, string(resp.Body), `"alarm":true`)
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "lost", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		settled, err := svc.App.Resolve(context.Background(), id, late.ID)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status)
		replay := postRefund(t, svc, bundle.apiKey, "lost", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, replay.Status, "body: %s", replay.Body)
		require.Equal(t, late.ID, *decode[refund](t, replay).StripeRefundID)
		got := getPaymentOf(t, svc, bundle.apiKey, p.ID)
		require.EqualValues(t, 600, got["amount_refunded"])
		rest := postRefund(t, svc, bundle.apiKey, "rest", p.ID, `{}`)
		require.EqualValues(t, 1400, decode[refund](t, rest).Amount, "the 600 refunded is not refundable again")
	})

	// A refund succeeds at Stripe, and a failover to an asynchronous standby
	// loses the refund's commits (its row, its key, the payment's amounts).
	// The Refund's events, which carry the refund's intent in their
	// metadata, find no refund: money returned that no row records. As for
	// a PaymentIntent whose payment was lost, an alarm, not "ignored", which
	// told no one unless the client happened to retry the key. A Refund of
	// a lost refund that failed returned nothing: ignored.
	t.Run("WebhookRefundOfALostRefundIsAnAlarm", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")

		created := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
		reA := *decode[refund](t, created).StripeRefundID

		// The failover loses the refund's commits.
		_, err := svc.Pool.Exec(context.Background(), `
			UPDATE payments SET amount_refunded = 0, amount_reserved = 0;
			DELETE FROM refunds;
			DELETE FROM idempotency_keys WHERE idempotency_key = 'back';`)
		require.NoError(t, err)

		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now())
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.EqualValues(t, 0, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
		require.Contains(t, string(resp.Body), `"alarm":true`,
			"Refund %s of this deployment returned 600 that no refund records; the event was %q: %q",
			reA, eventOutcomes(t, svc), lastEventReason(t, svc))
		require.Contains(t, lastEventReason(t, svc), "no refund here records it: money returned for a refund that was lost")
		requireMetric(t, svc, `paymentsd_webhook_events_total{outcome="alarm",type="refund.updated"} 1`)

		// A second refund of the payment, lost too, whose Refund failed.
		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		pending := postRefund(t, svc, bundle.apiKey, "more", p.ID, `{"amount": 400}`)
		require.Equal(t, http.StatusCreated, pending.Status, "body: %s", pending.Body)
		reC := *decode[refund](t, pending).StripeRefundID
		_, err = svc.Pool.Exec(context.Background(), `
			UPDATE payments SET amount_reserved = 0;
			DELETE FROM refunds;
			DELETE FROM idempotency_keys WHERE idempotency_key = 'more';`)
		require.NoError(t, err)
		_, err = bundle.em.SetRefundStatus(reC, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
		require.NoError(t, err)
		_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reC), time.Now())
		resp = deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Equal(t, []string{"alarm", "ignored"}, eventOutcomes(t, svc), "a failed Refund returned nothing")
	})
}

// eventOutcomes lists the recorded outcome of each event, in order.
func eventOutcomes(t *testing.T, svc *testutil.Service) []string {
	t.Helper()
	rows, err := svc.Pool.Query(context.Background(), "SELECT outcome FROM stripe_events ORDER BY received_at, id")
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		out = append(out, o)
	}
	require.NoError(t, rows.Err())
	return out
}

// chargedTwice makes key's payment end in a 500 that left its outcome
// unknown, and two succeeded PaymentIntents of its intent at Stripe.
func chargedTwice(t *testing.T, em *testutil.Emulator, svc *testutil.Service, userID int64, apiKey, key string) (first, second *stripe.PaymentIntent) {
	t.Helper()
	em.Inject(stripefake.Fault{Kind: stripefake.Fault500})
	requireProblem(t, svc.PostPayment(t, apiKey, key, visa), http.StatusServiceUnavailable, "processor-unavailable")
	in := intentOf(t, svc, userID, key)
	return plant(t, em, 2000, in.Metadata()), plant(t, em, 2000, in.Metadata())
}
