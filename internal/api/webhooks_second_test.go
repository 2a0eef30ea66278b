package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/phases"
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

// secondParked is refund key "back" of a payment, refunded 600 by its
// Refund reA (first, as the client was answered) and parked for a conflict
// (key id) by a second Refund reB of its intent, whose refund.created
// carried object.
type secondParked struct {
	first  refund
	reA    string
	reB    *stripe.Refund
	object string
	id     int64
}

// parkBySecondRefund refunds 600 of payment p under key "back" by a Refund
// re_A that starts first (stripefake.RefundPending or RefundSucceeded),
// then makes a second Refund re_B of the refund's intent, which starts
// second. re_B's refund.created is an alarm, and parks the key.
func parkBySecondRefund(t *testing.T, svc *testutil.Service, em *testutil.Emulator, apiKey string, userID int64, p payment, first, second string) secondParked {
	t.Helper()
	if first != stripefake.RefundSucceeded {
		require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: first}))
	}
	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
	parked := secondParked{first: decode[refund](t, created)}
	parked.reA = *parked.first.StripeRefundID

	if second != first {
		outcome := stripefake.RefundOutcome{} // as the card refunds: succeeded
		if second != stripefake.RefundSucceeded {
			outcome.Status = second
		}
		require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, outcome))
	}
	parked.reB, parked.object = alarmBySecondRefund(t, svc, em, userID, p)
	parked.id = keyID(t, svc, "back")
	return parked
}

// alarmBySecondRefund makes a second Refund re_B of 600 of the intent of
// refund key "back" of payment p, and delivers its refund.created, which
// carries object: an alarm. It returns re_B and object.
func alarmBySecondRefund(t *testing.T, svc *testutil.Service, em *testutil.Emulator, userID int64, p payment) (*stripe.Refund, string) {
	t.Helper()
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	object := stripeObject(t, svc, "/v1/refunds/"+reB.ID)
	_, payload := event("refund.created", object, time.Now().Add(time.Second))
	resp := deliver(t, svc, payload, whsec, time.Now())
	require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	return reB, object
}

// failRefund fails Refund re at Stripe (lost_or_stolen_card) and delivers
// its refund.updated, stamped after from now, which is answered 200.
func failRefund(t *testing.T, svc *testutil.Service, em *testutil.Emulator, re string, after time.Duration) {
	t.Helper()
	_, err := em.SetRefundStatus(re, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+re), time.Now().Add(after))
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
}

// resolveByTheFirst has the operator settle the parked key as the alarm
// tells: as refunded by re_A, the Refund the refund records.
func (s secondParked) resolveByTheFirst(t *testing.T, svc *testutil.Service) *phases.Response {
	t.Helper()
	settled, err := svc.App.Resolve(context.Background(), s.id, s.reA)
	require.NoError(t, err)
	return settled
}

// weighedByTheFirst is parkBySecondRefund, then the operator's
// resolveByTheFirst: the key settled as refunded by re_A, re_B weighed.
func weighedByTheFirst(t *testing.T, svc *testutil.Service, em *testutil.Emulator, apiKey string, userID int64, p payment, first, second string) secondParked {
	t.Helper()
	parked := parkBySecondRefund(t, svc, em, apiKey, userID, p, first, second)
	parked.resolveByTheFirst(t, svc)
	return parked
}

// returnedByStripe is the amount of every Refund at Stripe that did not
// fail: what Stripe returned, or is returning, to customers.
func returnedByStripe(em *testutil.Emulator) int64 {
	var returned int64
	for _, rf := range em.Refunds() {
		if rf.Status != stripefake.RefundFailed {
			returned += rf.Amount
		}
	}
	return returned
}

// refundStatus is the status recorded for the refund of payment p.
func refundStatus(t *testing.T, svc *testutil.Service, p payment) string {
	t.Helper()
	var status string
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT status FROM refunds WHERE payment_id = $1", rowID(t, svc, p.ID)).Scan(&status))
	return status
}

// keyParked reports whether key id awaits an operator.
func keyParked(t *testing.T, svc *testutil.Service, id int64) bool {
	t.Helper()
	var parked bool
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT needs_attention_at IS NOT NULL FROM idempotency_keys WHERE id = $1", id).Scan(&parked))
	return parked
}

// metricLine is the value /metrics shows for name, "" when it shows none.
func metricLine(t *testing.T, svc *testutil.Service, name string) string {
	t.Helper()
	resp := svc.Do(t, http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, resp.Status)
	for _, line := range strings.Split(string(resp.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
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
	// setupOn is setup on pool, or on a database of its own when pool is nil.
	setupOn := func(t *testing.T, pool *db.Pool) (*testutil.Service, *testBundle) {
		t.Helper()
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc := testutil.StartService(t, testutil.ServiceOptions{Pool: pool, Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, em: em, userID: userID}
	}
	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		return setupOn(t, nil)
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
		parked := keyParked(t, svc, id)
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
		failRefund(t, svc, bundle.em, reB.ID, 2*time.Second)
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

		parked := parkBySecondRefund(t, svc, bundle.em, bundle.apiKey, bundle.userID, p, stripefake.RefundSucceeded, stripefake.RefundSucceeded)
		reA, reB, id := parked.reA, parked.reB, parked.id
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		settled := parked.resolveByTheFirst(t, svc)
		require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`).Status)

		// The same change of re_B, as charge.refund.updated.
		_, payload := event("charge.refund.updated", parked.object, time.Now().Add(time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
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

		parked := parkBySecondRefund(t, svc, bundle.em, bundle.apiKey, bundle.userID, p, stripefake.RefundPending, stripefake.RefundSucceeded)
		reA, reB, object, id := parked.reA, parked.reB, parked.object, parked.id
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		settled := parked.resolveByTheFirst(t, svc)
		require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")

		// re_A succeeds: the refund records it.
		_, err := bundle.em.SetRefundStatus(reA, stripefake.RefundSucceeded, "")
		require.NoError(t, err)
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		require.Equal(t, []string{"alarm", "applied"}, eventOutcomes(t, svc))

		// The same re_B, succeeded, as charge.refund.updated.
		_, payload = event("charge.refund.updated", object, time.Now().Add(3*time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
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

		weighed := weighedByTheFirst(t, svc, bundle.em, bundle.apiKey, bundle.userID, p, stripefake.RefundSucceeded, stripefake.RefundPending)
		reA, reB, id := weighed.reA, weighed.reB, weighed.id
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`).Status)

		_, err := bundle.em.SetRefundStatus(reB.ID, stripefake.RefundSucceeded, "")
		require.NoError(t, err)
		object := stripeObject(t, svc, "/v1/refunds/"+reB.ID)
		var payload string
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

		parked := parkBySecondRefund(t, svc, bundle.em, bundle.apiKey, bundle.userID, p, stripefake.RefundSucceeded, stripefake.RefundSucceeded)
		reC, id := parked.reB, parked.id
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		reB := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, intentOf(t, svc, bundle.userID, "back").Metadata())
		object := stripeObject(t, svc, "/v1/refunds/"+reB.ID)
		_, payload := event("refund.created", object, time.Now().Add(2*time.Second))
		require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`)
		var kind, lastError string
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT coalesce(needs_attention_kind, ''), coalesce(last_error, '') FROM idempotency_keys WHERE id = $1", id).Scan(&kind, &lastError))
		require.Equal(t, "conflict", kind)
		require.Contains(t, lastError, reB.ID,
			"Refund %s returned the money again while key %d was parked for %s; the operator is told only: %s", reB.ID, id, reC.ID, lastError)
		require.Contains(t, lastError, reC.ID, "the earlier reason stays")
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		settled := parked.resolveByTheFirst(t, svc)
		require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
		_, payload = event("charge.refund.updated", object, time.Now().Add(3*time.Second))
		require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`)
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`).Status)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	})

	// Refund key "back" answered 201 pending with Refund re_A. A second Refund
	// re_B of its intent succeeds and parks the key; the operator does what the
	// alarm and docs/operations.md say (resolve it as refunded by re_A, the
	// Refund the refund records, while re_A stands). re_A then fails. re_B
	// returned the customer's 600; the refund records re_A's failure, gives its
	// 600 back to the payment, and nothing is handed to the operator again
	// (while parked, the same failure only alarmed). The payment shows 600
	// refundable that re_B already returned: a client that asks for it under a
	// new key refunds the customer 1200 for 600.
	t.Run("RecordedRefundFailingAfterTheOperatorWeighedASecondIsNotRefundedAgain", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		// re_B succeeds: the key is the operator's.
		parked := parkBySecondRefund(t, svc, bundle.em, bundle.apiKey, bundle.userID, p, stripefake.RefundPending, stripefake.RefundSucceeded)
		reA, reB, id := parked.reA, parked.reB, parked.id
		require.Equal(t, "succeeded", string(reB.Status))
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")

		// The operator resolves it as refunded by re_A, as told.
		settled := parked.resolveByTheFirst(t, svc)
		require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)

		// re_A fails at Stripe; re_B's 600 stays with the customer.
		_, err := bundle.em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
		require.NoError(t, err)
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		t.Logf("re_A's failure: %s (%s)", resp.Body, lastEventReason(t, svc))

		got := getPaymentOf(t, svc, bundle.apiKey, p.ID)
		handedBack := keyParked(t, svc, id)

		// The client asks for the 600 the books say is still refundable.
		again := postRefund(t, svc, bundle.apiKey, "again", p.ID, `{"amount": 600}`)
		returned := returnedByStripe(bundle.em)
		require.True(t, handedBack || got["amount_refunded"] == float64(600) || again.Status != http.StatusCreated,
			"Refund %s returned 600 for refund key \"back\" (settled by the operator as refunded by %s); %s then failed, "+
				"and the payment shows amount_refunded %v, the key is not handed back, and a new refund of 600 answered %d: "+
				"Stripe returned %d to the customer for one refund of 600",
			reB.ID, reA, reA, got["amount_refunded"], again.Status, returned)
	})

	// Refund key "back" answered 201 pending with Refund re_A; a second Refund
	// re_B of its intent succeeded, and its refund.created parked the key ("…
	// records Refund re_A (pending for 600) …"). re_A has succeeded at Stripe
	// since, its event not yet here. The operator resolves the key as refunded
	// by re_A, as told: the resolve reads re_A succeeded and records the refund
	// succeeded. Stripe's charge.refund.updated of the same change of re_B (no
	// news about re_B, the case TestWebhookSecond/RefundReopensItsKeyOnce
	// covers) words the alarm "(succeeded for 600)", because the operator's own
	// settling moved the refund. When reopenOnce compared alarms' words (up to
	// 93cb3dd) it took that for news and handed the settled key back: 503 for
	// nothing new. refunds.second_refunds (00030) records what re_B did
	// instead, and the settling stands.
	t.Run("RefundWithNoNewsLeavesTheKeyTheOperatorSettled", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		parked := parkBySecondRefund(t, svc, bundle.em, bundle.apiKey, bundle.userID, p, stripefake.RefundPending, stripefake.RefundSucceeded)
		reA, reB, id := parked.reA, parked.reB, parked.id

		// re_A succeeds at Stripe; the operator resolves by it.
		_, err := bundle.em.SetRefundStatus(reA, stripefake.RefundSucceeded, "")
		require.NoError(t, err)
		settled := parked.resolveByTheFirst(t, svc)
		require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`).Status)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")

		// The same change of re_B, as charge.refund.updated.
		_, payload := event("charge.refund.updated", parked.object, time.Now().Add(time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status)
		reason := lastEventReason(t, svc)
		replay := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, replay.Status,
			"the operator settled key %d as refunded by %s, weighing %s's 600; charge.refund.updated of the same change of %s "+
				"(no news) handed it back, because the settling itself reworded the alarm (%q): the client's refund answers %d %s",
			id, reA, reB.ID, reB.ID, reason, replay.Status, replay.Body)
	})

	// A second Refund re_B of the intent of a refund recorded failed hands its
	// key back to the operator (Engine.Reopen), which counts the key in
	// paymentsd_keys_needing_attention_total inside the webhook's transaction.
	// Postgres aborts that transaction once with a serialization failure (as a
	// concurrent delivery can), and db.WithTxV runs it again: counted as it
	// happened (up to 93cb3dd), one key parked once counted twice; counted by
	// db.AfterCommit, once. A trigger of the test's own database raises the
	// 40001, once.
	t.Run("RefundReopenRetriedCountsTheKeyParkedOnce", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")
		refundRecordedFailed(t, svc, bundle.em, bundle.apiKey, p)
		before := metricLine(t, svc, "paymentsd_keys_needing_attention_total")
		require.Equal(t, "0", before)

		_, err := svc.Pool.Exec(context.Background(), `
CREATE SEQUENCE attack_abort_once;
CREATE FUNCTION attack_abort_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.outcome IS DISTINCT FROM OLD.outcome AND nextval('attack_abort_once') = 1 THEN
        RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER attack_abort_once BEFORE UPDATE ON stripe_events FOR EACH ROW EXECUTE FUNCTION attack_abort_once();`)
		require.NoError(t, err)

		reB := secondRefund(t, bundle.em, *p.StripePaymentIntentID, 600, intentOf(t, svc, bundle.userID, "back").Metadata())
		_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
		require.Equal(t, "1", metricLine(t, svc, "paymentsd_keys_needing_attention_total"),
			"one refund key was handed back to the operator once (Refund %s); the counter of keys parked says %s, "+
				"because the retried webhook transaction counted its Reopen again", reB.ID,
			metricLine(t, svc, "paymentsd_keys_needing_attention_total"))
	})

	// Refund key "back" succeeded with Refund re_A (600 counted refunded); a
	// second Refund re_B of its intent succeeded too and parked the key, which
	// the operator settled as refunded by re_A, as told. re_A then fails at
	// Stripe (succeeded to failed). re_B returned the 600: the refund stays
	// succeeded, its 600 counted, and the key goes back to the operator, told
	// to resolve it by re_B, which settles it; re_A's and re_B's later events
	// change nothing.
	t.Run("RecordedRefundFailingAfterSucceedingHandsTheKeyBack", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		weighed := weighedByTheFirst(t, svc, bundle.em, bundle.apiKey, bundle.userID, p, stripefake.RefundSucceeded, stripefake.RefundSucceeded)
		reA, reB, id := weighed.reA, weighed.reB, weighed.id
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")

		_, err := bundle.em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
		require.NoError(t, err)
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		require.Contains(t, lastEventReason(t, svc), reB.ID, "the alarm names the second Refund")
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
		require.Equal(t, "succeeded", refundStatus(t, svc, p), "re_B returned the 600: the refund is not recorded failed")
		require.EqualValues(t, 600, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
		var lastError string
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT coalesce(last_error, '') FROM idempotency_keys WHERE id = $1", id).Scan(&lastError))
		require.Contains(t, lastError, "resolve it as refunded by "+reB.ID)

		// The operator settles it by re_B, as told.
		_, err = svc.App.Resolve(context.Background(), id, reA)
		require.ErrorIs(t, err, payments.ErrResolutionRefused, "re_A failed")
		settled, err := svc.App.Resolve(context.Background(), id, reB.ID)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
		replay := decode[refund](t, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`))
		require.Equal(t, "succeeded", replay.Status)
		require.Equal(t, reB.ID, *replay.StripeRefundID)
		for i, re := range []string{reA, reB.ID} {
			_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+re), time.Now().Add(time.Duration(3+i)*time.Second))
			require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		}
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`).Status)
		require.EqualValues(t, 600, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
		rest := postRefund(t, svc, bundle.apiKey, "rest", p.ID, `{}`)
		require.EqualValues(t, 1400, decode[refund](t, rest).Amount, "the 600 re_B returned is not refundable again")
	})

	// Refund key "back" is pending with Refund re_A; a second Refund re_B,
	// pending, parks the key, which the operator settles as refunded by re_A.
	// re_B fails (returned nothing), then re_A fails: nothing was returned, and
	// the refund is recorded failed without an operator, its 600 refundable
	// again.
	t.Run("RecordedRefundFailingAfterTheSecondFailedTooIsRecordedFailed", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		weighed := weighedByTheFirst(t, svc, bundle.em, bundle.apiKey, bundle.userID, p, stripefake.RefundPending, stripefake.RefundPending)

		for i, re := range []string{weighed.reB.ID, weighed.reA} {
			failRefund(t, svc, bundle.em, re, time.Duration(2+i)*time.Second)
		}
		require.Equal(t, []string{"alarm", "ignored", "applied"}, eventOutcomes(t, svc), "last: %q", lastEventReason(t, svc))
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`).Status)
		require.Equal(t, "failed", refundStatus(t, svc, p))
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
		require.EqualValues(t, 2000, decode[refund](t, postRefund(t, svc, bundle.apiKey, "rest", p.ID, `{}`)).Amount)
	})

	// Refund key "back" succeeded with Refund re_A (600 counted refunded). A
	// second Refund re_B of its intent, pending, parks the key; the operator
	// resolves it as refunded by re_A, as told. re_A then fails (succeeded to
	// failed): re_B was returning the money, so the refund stays succeeded and
	// the key goes back to the operator (ownFailedBesideSeconds). re_B then
	// fails too: nothing was returned to the customer. The operator is told to
	// resolve it "as not refunded if it failed too", but a refund recorded
	// succeeded is never moved out of succeeded by an operator
	// (RefundRecordOutcome), re_A and re_B are failed (Charged refuses both),
	// and re_A's redelivered event meets a key parked for a conflict: the
	// refund answers succeeded, the payment counts 600 refunded that nobody
	// returned, and the key is 503 for ever.
	t.Run("RecordedRefundFailingThenTheSecondLeavesAWayOut", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		// re_B, pending, parks the key; the operator resolves by re_A.
		weighed := weighedByTheFirst(t, svc, bundle.em, bundle.apiKey, bundle.userID, p, stripefake.RefundSucceeded, stripefake.RefundPending)
		reA, reB, id := weighed.reA, weighed.reB, weighed.id
		require.Equal(t, "succeeded", weighed.first.Status)
		require.Equal(t, "pending", string(reB.Status))

		// re_A fails: the key is handed back, the refund stays succeeded.
		_, err := bundle.em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
		require.NoError(t, err)
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
		require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
		told := lastEventReason(t, svc)

		// re_B fails too: nothing was returned.
		failRefund(t, svc, bundle.em, reB.ID, 3*time.Second)

		// Every way out: the operator as told, then re_A's event again.
		_, errNot := svc.App.Resolve(context.Background(), id, "")
		_, errA := svc.App.Resolve(context.Background(), id, reA)
		_, errB := svc.App.Resolve(context.Background(), id, reB.ID)
		_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(4*time.Second))
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)

		status := refundStatus(t, svc, p)
		refunded := getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"]
		replay := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		returned := returnedByStripe(bundle.em)
		require.False(t, status == "succeeded" && returned == 0,
			"%s and %s both failed (Stripe returned %d), yet refund \"back\" stays %s, the payment counts amount_refunded %v, "+
				"and key %d answers %d %s for good. The operator was told %q; resolve not-refunded: %v; by %s: %v; by %s: %v; "+
				"%s's event again: %q",
			reA, reB.ID, returned, status, refunded, id, replay.Status, replay.Body, told, errNot, reA, errA, reB.ID, errB,
			reA, lastEventReason(t, svc))
	})

	// The case of
	// RecordedRefundFailingAfterTheOperatorWeighedASecondIsNotRefundedAgain for
	// a key handed over for re_B before migration 00030: the database has no
	// second_refunds, and the hand-over left only an 'alarm' stripe_events row
	// naming re_B, in the words of the code then (93cb3dd). Applying 00030 must
	// fill second_refunds in from that row: otherwise, once the operator
	// resolves by re_A, as told, and re_A fails, moneyMoved finds no second
	// Refund, the refund is recorded failed and its 600 given back, and a new
	// refund of 600 goes to Stripe: the customer gets 1200 for 600.
	t.Run("RefundHandedOverBeforeMigration30KeepsTheKeyParked", func(t *testing.T) {
		t.Parallel()
		// Direct even in the pooled pass: the test migrates, and goose's
		// session lock needs one server connection from lock to unlock,
		// which transaction pooling does not promise (as in
		// public_ids_test.go). Through PgBouncer the unlock went to another
		// server connection and failed after a minute of retries.
		svc, bundle := setupOn(t, testutil.NewDirectDBWith(t, nil))
		p := paid(t, svc, bundle.apiKey, "pay") // 2000

		handedOver := parkBySecondRefund(t, svc, bundle.em, bundle.apiKey, bundle.userID, p, stripefake.RefundPending, stripefake.RefundSucceeded)
		reA, reB, id := handedOver.reA, handedOver.reB, handedOver.id
		// The database as a deployment before 00030 had it: 00030 not applied
		// (no second_refunds), and the alarm row of the hand-over in the words
		// 93cb3dd wrote it. Then 00030 is applied, as the upgrade does.
		ctx := context.Background()
		provider, sqlDB, err := db.Migrator(svc.Pool)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sqlDB.Close() })
		_, err = provider.ApplyVersion(ctx, 30, false)
		require.NoError(t, err)
		var refundID int64
		require.NoError(t, svc.Pool.QueryRow(ctx, "SELECT id FROM refunds WHERE stripe_refund_id = $1", reA).Scan(&refundID))
		old := fmt.Sprintf("Refund %s of refund %d's intent is %s for %d, and refund %d records Refund %s (%s for %d): "+
			"a second refund, money %s twice", reB.ID, refundID, "succeeded", 600, refundID, reA, "pending", 600, "returned")
		tag, err := svc.Pool.Exec(ctx, "UPDATE stripe_events SET reason = $1 WHERE object_id = $2 AND outcome = 'alarm'", old, reB.ID)
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected(), "the alarm row of %s's hand-over", reB.ID)
		_, err = provider.ApplyVersion(ctx, 30, true)
		require.NoError(t, err)
		var second string
		require.NoError(t, svc.Pool.QueryRow(ctx, "SELECT coalesce(second_refunds::text, '') FROM refunds WHERE id = $1", refundID).Scan(&second))
		require.JSONEq(t, fmt.Sprintf(`{%q: {"status": "succeeded", "refund_failed": false}}`, reB.ID), second,
			"00030 backfills the hand-over for %s from its alarm row", reB.ID)

		handedOver.resolveByTheFirst(t, svc)
		failRefund(t, svc, bundle.em, reA, 2*time.Second)
		reason := lastEventReason(t, svc)

		// re_B returned the 600: the refund is not answered failed (a client
		// told so would refund again under a new key), its 600 stays held, and
		// the key is the operator's again.
		told := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		var status string
		var parked bool
		require.NoError(t, svc.Pool.QueryRow(ctx, `SELECT r.status, k.needs_attention_at IS NOT NULL
			FROM refunds r JOIN idempotency_keys k ON k.id = r.idempotency_key_id WHERE r.id = $1`, refundID).Scan(&status, &parked))
		reserved := getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_reserved"]
		require.True(t, parked && status != "failed" && told.Status == http.StatusServiceUnavailable,
			"key %d was handed over for %s (succeeded, 600) before 00030; %s then failed (%q): refund %d is %s, payment "+
				"reserving %v, the key parked %t, and key \"back\" answers %d %s: a client told the refund failed refunds "+
				"600 again, which %s returned already",
			id, reB.ID, reA, reason, refundID, status, reserved, parked, told.Status, told.Body, reB.ID)
	})
}
