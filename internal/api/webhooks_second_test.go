package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// secondRefund makes a Refund of paymentIntentID at Stripe, outside
// paymentsd, carrying metadata: a second Refund of one refund's intent.
func secondRefund(t *testing.T, em *testutil.Emulator, paymentIntentID string, amount int64, metadata map[string]string) *stripe.Refund {
	t.Helper()
	params := &stripe.RefundParams{PaymentIntent: stripe.String(paymentIntentID), Amount: stripe.Int64(amount)}
	for k, v := range metadata {
		params.AddMetadata(k, v)
	}
	sr, err := stripeClient(em).Refunds.New(params)
	require.NoError(t, err)
	return sr
}

// lastEventReason is the reason recorded with the newest event.
func lastEventReason(t *testing.T, svc *testutil.Service) string {
	t.Helper()
	var reason string
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT coalesce(reason, '') FROM stripe_events ORDER BY received_at DESC, id DESC LIMIT 1").Scan(&reason))
	return reason
}

// refundRecordedFailed makes refund key "back" of payment p a refund whose
// answer was lost (Stripe made Refund re_A, pending; the row records no
// Refund), then settled by the refund.updated of re_A, which failed: the
// key answers "failed" and the reservation is given back. It returns re_A.
func refundRecordedFailed(t *testing.T, svc *testutil.Service, em *testutil.Emulator, apiKey string, p payment) string {
	t.Helper()
	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	em.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer})
	requireProblem(t, postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "processor-unavailable")
	rfs := em.Refunds()
	require.Len(t, rfs, 1)
	reA := rfs[0].ID

	_, err := em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now())
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
	require.Equal(t, []string{"applied"}, eventOutcomes(t, svc))
	told := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, told.Status, "body: %s", told.Body)
	require.Equal(t, "failed", decode[refund](t, told).Status, "the client is told the refund failed")
	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{}))
	return reA
}

// TestWebhookSecond covers a second Stripe object of one intent, made
// outside paymentsd (by a lost send, after a key rotation, by hand with
// the intent's metadata): a second Refund of a refund's intent, a second
// authorization of a payment's. Its events find no row by their object.
func TestWebhookSecond(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		em     *testutil.Emulator
		userID int64
	}

	// setup starts an emulator and a service that takes its webhooks, with
	// a completer that stays out of the way, and makes a user of it.
	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, em: em, userID: userID}
	}

	// A refund records its Stripe Refund, and a second Refund of the same
	// intent (made by a lost send, after a key rotation, by hand with the
	// intent's metadata) returns the money again. Its events find no refund by
	// their Refund, and the refund's intent no longer counts as unresolved;
	// they were answered "no refund here was made for Refund re_…" and ignored.
	// Money returned twice is an alarm, whatever the events' order, and changes
	// no refund or payment; the refund's key goes back to the operator, parked
	// for a conflict: a double refund is the operator's to weigh, and the key
	// no longer answers "refunded once" as if nothing happened.
	t.Run("RefundOfARefundIntentIsAnAlarm", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")

		// The refund is pending at first; its refund.updated (succeeded) then
		// records the Refund's status as of now (refunds.status_at).
		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		created := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
		first := decode[refund](t, created)
		require.NotNil(t, first.StripeRefundID)
		_, err := bundle.em.SetRefundStatus(*first.StripeRefundID, stripefake.RefundSucceeded, "")
		require.NoError(t, err)
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+*first.StripeRefundID), time.Now())
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		require.Equal(t, []string{"applied"}, eventOutcomes(t, svc))

		// The second Refund of the refund's intent, which succeeds.
		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{}))
		second := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, intentOf(t, svc, bundle.userID, "back").Metadata())
		require.NotEqual(t, *first.StripeRefundID, second.ID)

		// Its refund.created, stamped before the refund's recorded status: an
		// ordering check that came first would drop it as older.
		_, payload = event("refund.created", stripeObject(t, svc, "/v1/refunds/"+second.ID), time.Now().Add(-time.Hour))
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Contains(t, string(resp.Body), `"alarm":true`,
			"a second Refund of refund %s's intent returned the money again; recorded as %q", first.ID, lastEventReason(t, svc))
		_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+second.ID), time.Now())
		resp = deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		require.Contains(t, lastEventReason(t, svc), *first.StripeRefundID, "the alarm names the Refund the refund records")
		require.Equal(t, []string{"applied", "alarm", "alarm"}, eventOutcomes(t, svc))
		requireMetric(t, svc, `paymentsd_webhook_events_total{outcome="alarm",type="refund.created"} 1`)
		requireMetric(t, svc, `paymentsd_webhook_events_total{outcome="alarm",type="refund.updated"} 1`)

		// Nothing recorded moved: the refund keeps its Refund, and the
		// payment counts the money once. The key, though, awaits the
		// operator (once, for both events): a double refund is theirs, and
		// answering "refunded" by re_A alone would hide it.
		var stripeRefundID, status string
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT stripe_refund_id, status FROM refunds WHERE payment_id = $1", rowID(t, svc, p.ID)).Scan(&stripeRefundID, &status))
		require.Equal(t, *first.StripeRefundID, stripeRefundID)
		require.Equal(t, "succeeded", status)
		require.EqualValues(t, 600, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		// The second Refund then fails: the money came back, and its event is
		// only ignored.
		_, err = bundle.em.SetRefundStatus(second.ID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
		require.NoError(t, err)
		_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+second.ID), time.Now())
		resp = deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Equal(t, []string{"applied", "alarm", "alarm", "ignored"}, eventOutcomes(t, svc))
		require.EqualValues(t, 600, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])

		// The operator, who learned the second returned nothing, settles the
		// key as refunded by re_A, as it was.
		settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "back"), *first.StripeRefundID)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
		replay := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, replay.Status, "body: %s", replay.Body)
		require.Equal(t, *first.StripeRefundID, *decode[refund](t, replay).StripeRefundID)
		require.EqualValues(t, 600, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	})

	// A manual payment's second PaymentIntent of its intent reaches
	// requires_capture (payment_intent.amount_capturable_updated): the
	// customer's funds are held by an authorization no payment records. Only a
	// second PaymentIntent that succeeded raised the alarm; this one was
	// answered "no payment here was made for PaymentIntent pi_…" (or, for a
	// payment recorded as not charged, "took no money") and ignored.
	t.Run("AuthorizationOfAPaymentIntentIsAnAlarm", func(t *testing.T) {
		t.Parallel()

		// authorizedAgain delivers the amount_capturable_updated of a second
		// authorization of key's intent, and requires an alarm.
		authorizedAgain := func(t *testing.T, svc *testutil.Service, bundle *testBundle, key string) *stripe.PaymentIntent {
			t.Helper()
			pi := plantAuthorization(t, bundle.em, 2000, intentOf(t, svc, bundle.userID, key).Metadata())
			_, payload := event("payment_intent.amount_capturable_updated", stripeObject(t, svc, "/v1/payment_intents/"+pi.ID), time.Now())
			resp := deliver(t, svc, payload, whsec, time.Now())
			require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
			require.Contains(t, string(resp.Body), `"alarm":true`,
				"PaymentIntent %s of this intent holds the customer's funds; recorded as %q", pi.ID, lastEventReason(t, svc))
			requireMetric(t, svc, `paymentsd_webhook_events_total{outcome="alarm",type="payment_intent.amount_capturable_updated"} 1`)
			return pi
		}

		// The payment is authorized by its own PaymentIntent; a second one of
		// its intent holds the funds again.
		t.Run("OfAnAuthorizedPayment", func(t *testing.T) {
			t.Parallel()
			svc, bundle := setup(t)
			p := authorized(t, svc, bundle.apiKey, "auth")
			second := authorizedAgain(t, svc, bundle, "auth")
			require.NotEqual(t, *p.StripePaymentIntentID, second.ID)

			got := getPaymentOf(t, svc, bundle.apiKey, p.ID)
			require.Equal(t, "requires_capture", got["status"], "the event changed nothing")
			require.Equal(t, *p.StripePaymentIntentID, got["stripe_payment_intent_id"])
		})

		// The payment was declined with a PaymentIntent of its own; another of
		// its intent is authorized. The customer told "declined" has funds
		// held: the key goes back to the operator, who settles it as
		// authorized by that PaymentIntent.
		t.Run("OfADeclinedPayment", func(t *testing.T) {
			t.Parallel()
			svc, bundle := setup(t)
			declined := `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_chargeDeclined", "capture_method": "manual"}`
			first := svc.PostPayment(t, bundle.apiKey, "declined", declined)
			require.Equal(t, http.StatusPaymentRequired, first.Status, "body: %s", first.Body)

			pi := authorizedAgain(t, svc, bundle, "declined")
			requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
			requireProblem(t, svc.PostPayment(t, bundle.apiKey, "declined", declined), http.StatusServiceUnavailable, "needs-attention")

			settled, err := svc.App.Resolver.Charged(context.Background(), keyID(t, svc, "declined"), pi.ID)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
			replay := decode[payment](t, svc.PostPayment(t, bundle.apiKey, "declined", declined))
			require.Equal(t, "requires_capture", replay.Status)
			require.Equal(t, pi.ID, *replay.StripePaymentIntentID)
		})

		// An operator recorded the payment as not charged (it has no
		// PaymentIntent); an authorization of its intent then appears.
		t.Run("OfAPaymentRecordedNotCharged", func(t *testing.T) {
			t.Parallel()
			svc, bundle := setup(t)
			bundle.em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
			requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", manualVisa), http.StatusServiceUnavailable, "needs-attention")
			_, err := svc.App.Resolver.NotCharged(context.Background(), keyID(t, svc, "late"))
			require.NoError(t, err)
			requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", manualVisa), http.StatusBadRequest, "payment-rejected")

			authorizedAgain(t, svc, bundle, "late")
			requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
			requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", manualVisa), http.StatusServiceUnavailable, "needs-attention")
		})
	})

	// settleByTheSecondRefund has the operator settle refund key "back" of
	// payment p (2000), key id, which refunded 600 by the failed Refund reA
	// and parked when the second Refund reB succeeded: resolving it by reA is
	// refused, by reB settles it, and the key then replays a refund succeeded
	// by reB, whose 600 the payment counts and no new refund takes again.
	settleByTheSecondRefund := func(t *testing.T, svc *testutil.Service, bundle *testBundle, p payment, id int64, reA, reB string) {
		t.Helper()
		_, err := svc.App.Resolve(context.Background(), id, reA)
		require.ErrorIs(t, err, payments.ErrResolutionRefused, "re_A failed")
		settled, err := svc.App.Resolve(context.Background(), id, reB)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
		replay := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, replay.Status, "body: %s", replay.Body)
		got := decode[refund](t, replay)
		require.Equal(t, "succeeded", got.Status)
		require.Equal(t, reB, *got.StripeRefundID)
		require.EqualValues(t, 600, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
		rest := postRefund(t, svc, bundle.apiKey, "rest", p.ID, `{}`)
		require.EqualValues(t, 1400, decode[refund](t, rest).Amount, "the 600 refunded is not refundable again")
	}

	// A refund whose answer was lost is settled by the refund.updated of its
	// Refund re_A, which failed: the key answers "failed" and the reservation
	// is given back. A second Refund re_B of the same intent then succeeds:
	// money returned for a refund the client was told failed. As for a declined
	// payment whose intent's other PaymentIntent succeeds, the key goes back to
	// the operator (the "second Refund" alarm alone left it answering "failed",
	// and the client, told so, refunds again under a new key), who settles it
	// as refunded by re_B.
	t.Run("RefundOfARefundRecordedFailedReopensItsKey", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000
		reA := refundRecordedFailed(t, svc, bundle.em, bundle.apiKey, p)

		// A second Refund of the intent succeeds: the money went back.
		reB := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, intentOf(t, svc, bundle.userID, "back").Metadata())
		_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		require.Contains(t, lastEventReason(t, svc), "recorded failed (lost_or_stolen_card) by Refund "+reA)
		require.Contains(t, lastEventReason(t, svc), "money returned for a refund answered failed")
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		// The customer got 600 back; the key must no longer say "failed".
		id := keyID(t, svc, "back")
		var parked bool
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT needs_attention_at IS NOT NULL FROM idempotency_keys WHERE id = $1", id).Scan(&parked))
		replay := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.True(t, parked,
			"Refund %s returned 600 for refund key \"back\", which still answers %d %s (refund failed): the client will refund again",
			reB.ID, replay.Status, replay.Body)
		requireProblem(t, replay, http.StatusServiceUnavailable, "needs-attention")

		// The operator settles it as refunded by re_B: the refund, recorded
		// failed by an event, succeeds with re_B, and takes its 600 again.
		settleByTheSecondRefund(t, svc, bundle, p, id, reA, reB.ID)

		// re_A's and re_B's later events change nothing.
		for _, re := range []string{reA, reB.ID} {
			_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+re), time.Now().Add(2*time.Second))
			require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		}
		require.Equal(t, []string{"applied", "alarm", "ignored", "applied"}, eventOutcomes(t, svc))
		require.EqualValues(t, 2000, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
	})

	// Refund key "back" answered 201 pending for its Refund re_A. A second
	// Refund re_B of the same intent succeeds: the money went back. Then re_A
	// fails. The "second Refund" alarm alone left the key answering pending,
	// and re_A's failure then recorded the refund failed, gave its reservation
	// back and answered "failed": a client told so refunds again, though re_B
	// returned the money. re_B hands the key to the operator instead, parked
	// for a conflict, so re_A's failure changes nothing but raises an alarm,
	// and the operator settles it as refunded by re_B.
	t.Run("RefundWhileTheFirstIsPendingParksTheKey", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		created := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
		first := decode[refund](t, created)
		require.Equal(t, "pending", first.Status)
		reA := *first.StripeRefundID
		amounts := func() (refunded, reserved int64, status string) {
			t.Helper()
			require.NoError(t, svc.Pool.QueryRow(context.Background(),
				"SELECT p.amount_refunded, p.amount_reserved, r.status FROM payments p JOIN refunds r ON r.payment_id = p.id WHERE p.id = $1",
				rowID(t, svc, p.ID)).Scan(&refunded, &reserved, &status))
			return refunded, reserved, status
		}
		refunded, reserved, status := amounts()
		require.Equal(t, "pending", status)

		// A second Refund re_B of the intent succeeds: the money went back.
		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{}))
		reB := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, intentOf(t, svc, bundle.userID, "back").Metadata())
		_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		require.Contains(t, lastEventReason(t, svc), reA)
		id := keyID(t, svc, "back")
		var parked bool
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT needs_attention_kind IS NOT DISTINCT FROM 'conflict' FROM idempotency_keys WHERE id = $1", id).Scan(&parked))
		replay := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.True(t, parked,
			"Refund %s returned 600 for refund key \"back\", pending by Refund %s, which still answers %d %s: "+
				"re_A's failure will answer \"failed\" and the client will refund again", reB.ID, reA, replay.Status, replay.Body)
		requireProblem(t, replay, http.StatusServiceUnavailable, "needs-attention")
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		// re_A then fails: the key is the operator's, and nothing moves.
		_, err := bundle.em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
		require.NoError(t, err)
		_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
		resp = deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		require.Equal(t, []string{"alarm", "alarm"}, eventOutcomes(t, svc))
		gotRefunded, gotReserved, gotStatus := amounts()
		require.Equal(t, []any{refunded, reserved, "pending"}, []any{gotRefunded, gotReserved, gotStatus}, "re_A's failure moved nothing")
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")

		// The operator settles it as refunded by re_B.
		settleByTheSecondRefund(t, svc, bundle, p, id, reA, reB.ID)
	})

	// The key of a refund recorded failed goes back to the operator when a
	// second Refund of its intent succeeds, but meanwhile the client, told
	// "failed", refunded again under another key, which holds the amount the
	// failure gave back. Settling the key as refunded would take more than was
	// captured: it is refused, saying why, never a constraint's error.
	t.Run("RefundOfARefundRecordedFailedIsRefusedWithoutRoom", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000
		refundRecordedFailed(t, svc, bundle.em, bundle.apiKey, p)

		// The client's new refund reserves 1500 and awaits an operator.
		bundle.em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "again", p.ID, `{"amount": 1500}`), http.StatusServiceUnavailable, "needs-attention")

		reB := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, intentOf(t, svc, bundle.userID, "back").Metadata())
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")

		_, err := svc.App.Resolve(context.Background(), keyID(t, svc, "back"), reB.ID)
		require.ErrorIs(t, err, payments.ErrResolutionRefused)
		require.ErrorContains(t, err, "500 of 2000 left to refund")
		require.ErrorContains(t, err, "returned money twice")
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
		require.EqualValues(t, 0, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"], "nothing moved")
	})

	// Refund key "back" succeeded with Refund re_A (600 returned, counted in
	// amount_refunded). A second Refund re_B of its intent, pending, parks the
	// key for a conflict, and the alarm tells the operator to resolve it as
	// refunded by re_A and deal with re_B in Stripe. Resolving it by re_B is
	// refused, as re_A did not fail, and nothing moves: the refund stays
	// succeeded, its 600 counted. When re_B then fails, the books still say
	// re_A returned 600.
	t.Run("RefundPendingDoesNotUnrefundASucceededRefund", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		created := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
		first := decode[refund](t, created)
		require.Equal(t, "succeeded", first.Status)
		reA := *first.StripeRefundID
		require.EqualValues(t, 600, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])

		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		reB := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, intentOf(t, svc, bundle.userID, "back").Metadata())
		_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		require.Contains(t, lastEventReason(t, svc), reA)
		id := keyID(t, svc, "back")
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")

		// The operator tries to resolve it by re_B.
		_, err := svc.App.Resolve(context.Background(), id, reB.ID)
		t.Logf("resolve by pending %s: err=%v", reB.ID, err)
		require.ErrorIs(t, err, payments.ErrResolutionRefused, "refunded by %s, which did not fail", reA)
		require.ErrorContains(t, err, "resolve it as refunded by "+reA)
		require.EqualValues(t, 600, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"],
			"Refund %s returned 600 and succeeded; resolving its key by pending Refund %s took the 600 out of amount_refunded", reA, reB.ID)

		// re_B fails: nothing of the 600 re_A returned is left in the books.
		_, err = bundle.em.SetRefundStatus(reB.ID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
		require.NoError(t, err)
		_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(2*time.Second))
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		require.EqualValues(t, 600, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"],
			"re_A returned 600, the books say %v", getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
	})

	// Refund key "back" succeeded with Refund re_A; a second Refund re_B of its
	// intent succeeded too, and its refund.created parked the key for a
	// conflict. The operator weighs it and resolves the key as refunded by
	// re_A. Stripe sends, for the same change of re_B, charge.refund.updated as
	// well (another event id, no news): it only alarms, and the settled key
	// keeps its answer, the needs-attention gauge at 0.
	t.Run("RefundReopensItsKeyOnce", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		created := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
		reA := *decode[refund](t, created).StripeRefundID

		reB := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, intentOf(t, svc, bundle.userID, "back").Metadata())
		object := stripeObject(t, svc, "/v1/refunds/"+reB.ID)
		_, payload := event("refund.created", object, time.Now().Add(time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
		id := keyID(t, svc, "back")

		settled, err := svc.App.Resolve(context.Background(), id, reA)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`).Status)

		// The same change of re_B, as charge.refund.updated.
		_, payload = event("charge.refund.updated", object, time.Now().Add(time.Second))
		resp = deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status)
		t.Logf("charge.refund.updated of %s: %s (%s)", reB.ID, resp.Body, lastEventReason(t, svc))
		replay := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, replay.Status,
			"the operator settled key %d as refunded by %s; another event of %s, no news, parked it again: %s", id, reA, reB.ID, replay.Body)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	})

	// Refund key "back" is pending with Refund re_A when a second Refund re_B
	// of its intent succeeds and parks the key. The operator resolves it as
	// refunded by re_A, still pending; re_A then succeeds, and the refund
	// records it. A later event of re_B says nothing new about re_B (it
	// succeeded, as when the key was handed over): it only alarms, though what
	// the refund records changed, and the operator's settling stands.
	t.Run("RefundReopensOnceWhateverTheRefundRecords", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		created := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
		reA := *decode[refund](t, created).StripeRefundID

		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{}))
		reB := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, intentOf(t, svc, bundle.userID, "back").Metadata())
		object := stripeObject(t, svc, "/v1/refunds/"+reB.ID)
		_, payload := event("refund.created", object, time.Now().Add(time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
		id := keyID(t, svc, "back")

		settled, err := svc.App.Resolve(context.Background(), id, reA)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")

		// re_A succeeds: the refund records it.
		_, err = bundle.em.SetRefundStatus(reA, stripefake.RefundSucceeded, "")
		require.NoError(t, err)
		_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		require.Equal(t, []string{"alarm", "applied"}, eventOutcomes(t, svc))

		// The same re_B, succeeded, as charge.refund.updated.
		_, payload = event("charge.refund.updated", object, time.Now().Add(3*time.Second))
		resp = deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		replay := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, replay.Status,
			"the operator settled key %d as refunded by %s after %s succeeded; another event of %s, no news, parked it again (%s): %s",
			id, reA, reB.ID, reB.ID, lastEventReason(t, svc), replay.Body)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	})

	// A second Refund re_B of refund key "back"'s intent is pending, and parks
	// the key; the operator resolves it as refunded by re_A. re_B then
	// succeeds: the money went back twice, which the operator did not weigh
	// yet, and the key is handed over again, once.
	t.Run("RefundReopensAgainOnceItSucceeds", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		created := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
		reA := *decode[refund](t, created).StripeRefundID

		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		reB := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, intentOf(t, svc, bundle.userID, "back").Metadata())
		_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
		require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`)
		id := keyID(t, svc, "back")
		_, err := svc.App.Resolve(context.Background(), id, reA)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`).Status)

		_, err = bundle.em.SetRefundStatus(reB.ID, stripefake.RefundSucceeded, "")
		require.NoError(t, err)
		object := stripeObject(t, svc, "/v1/refunds/"+reB.ID)
		for i, typ := range []string{"refund.updated", "charge.refund.updated"} {
			_, payload = event(typ, object, time.Now().Add(time.Duration(2+i)*time.Second))
			require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`)
			requireProblem(t, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
			requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
		}
		_, err = svc.App.Resolve(context.Background(), id, reA)
		require.NoError(t, err)
		_, payload = event("refund.updated", object, time.Now().Add(4*time.Second))
		require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`)
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`).Status)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	})

	// Refund key "back" succeeded with Refund re_A, and a second Refund re_C
	// of its intent parked it for a conflict. A third, re_B, then returns the
	// money again while the key is parked: the key could not be reopened, and
	// the operator, told of re_C alone, would settle it as if re_B did not
	// exist. The key now names re_B too, and re_B's later events, with no
	// news, only alarm once the operator settled it.
	t.Run("RefundOfAParkedKeyIsHandedOverToo", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		created := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
		reA := *decode[refund](t, created).StripeRefundID
		metadata := intentOf(t, svc, bundle.userID, "back").Metadata()

		reC := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, metadata)
		_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reC.ID), time.Now().Add(time.Second))
		require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`)
		id := keyID(t, svc, "back")
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		reB := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, metadata)
		object := stripeObject(t, svc, "/v1/refunds/"+reB.ID)
		_, payload = event("refund.created", object, time.Now().Add(2*time.Second))
		require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`)
		var kind, lastError string
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT coalesce(needs_attention_kind, ''), coalesce(last_error, '') FROM idempotency_keys WHERE id = $1", id).Scan(&kind, &lastError))
		require.Equal(t, "conflict", kind)
		require.Contains(t, lastError, reB.ID,
			"Refund %s returned the money again while key %d was parked for %s; the operator is told only: %s", reB.ID, id, reC.ID, lastError)
		require.Contains(t, lastError, reC.ID, "the earlier reason stays")
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		settled, err := svc.App.Resolve(context.Background(), id, reA)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
		_, payload = event("charge.refund.updated", object, time.Now().Add(3*time.Second))
		require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`)
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`).Status)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	})
}
