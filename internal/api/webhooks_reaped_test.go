package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// TestWebhookAlarmsAfterReaping covers money Stripe moved for a payment or
// refund recorded as not moved, when the event comes after the reaper took
// the key that answered "not charged" (or "not refunded"): the key comes
// back from its tombstone to the operator's queue, so that a retry is told
// to wait, `keys list --state needs-attention` shows it, and `keys resolve`
// settles it with an answer the retry then replays.
func TestWebhookAlarmsAfterReaping(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		em     *testutil.Emulator
		userID int64
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, em: em, userID: userID}
	}

	// parked is what `keys list --state needs-attention` reads.
	parked := func(t *testing.T, svc *testutil.Service) []*dbsqlc.IdempotencyKeyListUnfinishedRow {
		t.Helper()
		rows, err := dbsqlc.New().IdempotencyKeyListUnfinished(context.Background(), svc.Pool,
			&dbsqlc.IdempotencyKeyListUnfinishedParams{NeedsAttentionOnly: true, MaxKeys: 100})
		require.NoError(t, err)
		return rows
	}

	tombstones := func(t *testing.T, svc *testutil.Service, key string) int {
		t.Helper()
		var n int
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM idempotency_key_tombstones WHERE idempotency_key = $1", key).Scan(&n))
		return n
	}

	// A payment an operator recorded as not charged, its key reaped, then
	// its PaymentIntent succeeds. Before: an alarm only; the payment stayed
	// failed, the retry got the tombstone's 422, the operator's queue was
	// empty and `keys resolve` had nothing to settle.
	t.Run("ChargeOfAReapedNotChargedPaymentGoesBackToTheOperator", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		svc, bundle := setup(t)
		bundle.em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", visa), http.StatusServiceUnavailable, "needs-attention")
		_, err := svc.App.Resolver.NotCharged(ctx, keyID(t, svc, "late"))
		require.NoError(t, err)
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", visa), http.StatusBadRequest, "payment-rejected")
		reapKeys(t, svc, 1)
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", visa), http.StatusUnprocessableEntity, "idempotency-key-expired")

		pi := plant(t, bundle.em, 2000, intentOf(t, svc, bundle.userID, "late").Metadata())
		_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+pi.ID), time.Now())
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.Contains(t, string(resp.Body), `"alarm":true`)
		requireMetric(t, svc, `paymentsd_webhook_events_total{outcome="alarm",type="payment_intent.succeeded"} 1`)

		// The operator's queue holds the key, and the retry is told to wait.
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
		lines := parked(t, svc)
		require.Len(t, lines, 1, "keys list --state needs-attention")
		require.Equal(t, "late", lines[0].IdempotencyKey)
		require.Equal(t, "POST /payments", lines[0].RequestMethod+" "+lines[0].RequestPath)
		require.NotNil(t, lines[0].LastError)
		require.Contains(t, *lines[0].LastError, pi.ID)
		require.Contains(t, *lines[0].LastError, "recorded failed (not_charged)")
		require.Contains(t, *lines[0].LastError, "resolve it as charged")
		require.Zero(t, tombstones(t, svc, "late"), "the key is live again")
		p := requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", visa), http.StatusServiceUnavailable, "needs-attention")
		require.Contains(t, p.Detail, "operator")

		// Stripe redelivers: a duplicate, the key restored once.
		dup := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, dup.Status)
		require.Contains(t, string(dup.Body), `"duplicate":true`)
		require.Len(t, parked(t, svc), 1)

		// The operator cannot call it not charged, and settles it as charged.
		id := lines[0].ID
		_, err = svc.App.Resolver.NotCharged(ctx, id)
		require.Error(t, err, "Stripe shows the charge")
		settled, err := svc.App.Resolve(ctx, id, pi.ID)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
		require.Empty(t, parked(t, svc))

		// The client retrying its old key now learns the truth.
		replay := svc.PostPayment(t, bundle.apiKey, "late", visa)
		require.Equal(t, http.StatusCreated, replay.Status, "body: %s", replay.Body)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		got := decode[payment](t, replay)
		require.Equal(t, pi.ID, *got.StripePaymentIntentID)
		require.Equal(t, "succeeded", got.Status)
		require.Equal(t, "succeeded", getPaymentOf(t, svc, bundle.apiKey, got.ID)["status"])
		require.Equal(t, 1, receipts(t, svc), "the charge gets its receipt")
	})

	// The same for a refund recorded as not refunded whose Refund succeeds
	// after its key was reaped: the operator settles it as refunded, and the
	// payment counts the money.
	t.Run("RefundOfAReapedNotRefundedKeyGoesBackToTheOperator", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")
		bundle.em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "lost", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
		_, err := svc.App.Resolve(ctx, keyID(t, svc, "lost"), "")
		require.NoError(t, err)
		reapKeys(t, svc, 2)
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "lost", p.ID, `{"amount": 600}`), http.StatusUnprocessableEntity, "idempotency-key-expired")

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

		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
		lines := parked(t, svc)
		require.Len(t, lines, 1, "keys list --state needs-attention")
		require.Equal(t, "lost", lines[0].IdempotencyKey)
		require.Contains(t, *lines[0].LastError, late.ID)
		require.Zero(t, tombstones(t, svc, "lost"))
		require.Equal(t, 1, tombstones(t, svc, "pay"), "the payment's own key stays reaped")
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "lost", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")

		settled, err := svc.App.Resolve(ctx, lines[0].ID, late.ID)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status)
		replay := postRefund(t, svc, bundle.apiKey, "lost", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, replay.Status, "body: %s", replay.Body)
		require.Equal(t, late.ID, *decode[refund](t, replay).StripeRefundID)
		require.EqualValues(t, 600, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
	})

	// A declined payment records its declined PaymentIntent; another
	// PaymentIntent of its intent then succeeds (a lost attempt, the
	// dashboard): the customer told "declined" was charged. Before: an
	// alarm only, the payment could not be found by its intent, and the key
	// (live, or reaped) kept its answer.
	t.Run("ChargeOfADeclinedPaymentByAnotherPaymentIntentGoesBackToTheOperator", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		svc, bundle := setup(t)
		const declined = `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_chargeDeclined"}`
		for _, key := range []string{"declined-live", "declined-reaped"} {
			first := svc.PostPayment(t, bundle.apiKey, key, declined)
			require.Equal(t, http.StatusPaymentRequired, first.Status, "body: %s", first.Body)
		}
		reapKeys(t, svc, 1, "declined-reaped")

		for _, key := range []string{"declined-live", "declined-reaped"} {
			charged := plant(t, bundle.em, 2000, intentOf(t, svc, bundle.userID, key).Metadata())
			_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+charged.ID), time.Now())
			resp := deliver(t, svc, payload, whsec, time.Now())
			require.Equal(t, http.StatusOK, resp.Status)
			require.Contains(t, string(resp.Body), `"alarm":true`)
			p := requireProblem(t, svc.PostPayment(t, bundle.apiKey, key, declined), http.StatusServiceUnavailable, "needs-attention")
			require.Contains(t, p.Detail, "operator", key)

			var line *dbsqlc.IdempotencyKeyListUnfinishedRow
			for _, l := range parked(t, svc) {
				if l.IdempotencyKey == key {
					line = l
				}
			}
			require.NotNil(t, line, "keys list --state needs-attention shows %s", key)
			require.Contains(t, *line.LastError, charged.ID)
			settled, err := svc.App.Resolve(ctx, line.ID, charged.ID)
			require.NoError(t, err)
			require.Equal(t, http.StatusCreated, settled.Status)
			replay := svc.PostPayment(t, bundle.apiKey, key, declined)
			require.Equal(t, http.StatusCreated, replay.Status, "body: %s", replay.Body)
			require.Equal(t, charged.ID, *decode[payment](t, replay).StripePaymentIntentID)
		}
		requireMetric(t, svc, `paymentsd_webhook_events_total{outcome="alarm",type="payment_intent.succeeded"} 2`)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	})

	// Past the tombstone's retention nothing names the key any more: the
	// event stays an alarm, as before, and says so.
	t.Run("ChargeAfterTheTombstoneExpiredStaysAnAlarm", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		svc, bundle := setup(t)
		bundle.em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "gone", visa), http.StatusServiceUnavailable, "needs-attention")
		_, err := svc.App.Resolver.NotCharged(ctx, keyID(t, svc, "gone"))
		require.NoError(t, err)
		reapKeys(t, svc, 1)
		_, err = svc.Pool.Exec(ctx, "DELETE FROM idempotency_key_tombstones")
		require.NoError(t, err)

		pi := plant(t, bundle.em, 2000, intentOf(t, svc, bundle.userID, "gone").Metadata())
		_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+pi.ID), time.Now())
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status)
		require.Contains(t, string(resp.Body), `"alarm":true`)
		var reason string
		require.NoError(t, svc.Pool.QueryRow(ctx, "SELECT reason FROM stripe_events WHERE outcome = 'alarm'").Scan(&reason))
		require.Contains(t, reason, "tombstone")
		require.Empty(t, parked(t, svc))
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	})
}

// reapKeys ages the finished keys named (every finished key when none is)
// past the 24 h retention and runs the reaper, which must take want of them
// and leave a tombstone for each.
func reapKeys(t *testing.T, svc *testutil.Service, want int64, keys ...string) {
	t.Helper()
	if keys == nil {
		keys = []string{}
	}
	_, err := svc.Pool.Exec(context.Background(), `UPDATE idempotency_keys SET finished_at = now() - interval '2 days'
		WHERE recovery_point = 'finished' AND (cardinality($1::text[]) = 0 OR idempotency_key = ANY($1))`, keys)
	require.NoError(t, err)
	reaper := &workers.ReaperWorker{Pool: svc.Pool, Config: workers.ReaperConfig{Retention: 24 * time.Hour}, Log: testutil.Logger(t)}
	reaped, err := reaper.RunOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, want, reaped)
}
