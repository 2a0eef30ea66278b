package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79/webhook"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

const whsec = "whsec_test_paymentsd"

var eventSeq atomic.Int64

// TestWebhooks covers POST /webhooks/stripe: signatures, and the events that
// settle keys, move refunds and mark disputes.
func TestWebhooks(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		userID int64
	}

	// setupWith starts a service that takes Stripe's webhooks, signed with
	// whsec, and makes a user of it.
	setupWith := func(t *testing.T, opts testutil.ServiceOptions) (*testutil.Service, *testBundle) {
		t.Helper()
		opts.WebhookSecret = whsec
		svc := testutil.StartService(t, opts)
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, userID: userID}
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		return setupWith(t, testutil.ServiceOptions{})
	}

	t.Run("WebhookSignaturesAreVerified", func(t *testing.T) {
		t.Parallel()
		svc, _ := setup(t)
		_, payload := event("payment_intent.succeeded", `{"id":"pi_x","object":"payment_intent"}`, time.Now())

		requireProblem(t, svc.Do(t, http.MethodPost, "/webhooks/stripe", payload, "Content-Type", "application/json"),
			http.StatusBadRequest, "invalid-signature")
		requireProblem(t, deliver(t, svc, payload, "whsec_forged", time.Now()), http.StatusBadRequest, "invalid-signature")
		requireProblem(t, deliver(t, svc, payload, whsec, time.Now().Add(-301*time.Second)), http.StatusBadRequest, "invalid-signature")
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(payload), Secret: whsec, Timestamp: time.Now()})
		altered := strings.Replace(payload, "pi_x", "pi_y", 1)
		requireProblem(t, svc.Do(t, http.MethodPost, "/webhooks/stripe", altered, "Stripe-Signature", signed.Header),
			http.StatusBadRequest, "invalid-signature")
		require.Zero(t, countEvents(t, svc, ""), "nothing recorded")

		// Several v1 signatures, one of them right: accepted.
		twoSigs := signed.Header + ",v1=" + strings.Repeat("ab", 32)
		ok := svc.Do(t, http.MethodPost, "/webhooks/stripe", payload, "Stripe-Signature", twoSigs)
		require.Equal(t, http.StatusOK, ok.Status, "body: %s", ok.Body)

		// An event type nobody handles: 200, recorded as ignored.
		_, other := event("customer.created", `{"id":"cus_1","object":"customer"}`, time.Now())
		require.Equal(t, http.StatusOK, deliver(t, svc, other, whsec, time.Now()).Status)
		require.Equal(t, 2, countEvents(t, svc, "WHERE outcome = 'ignored'"))

		// Without a secret, no endpoint at all.
		bare := testutil.StartService(t, testutil.ServiceOptions{})
		require.Equal(t, http.StatusNotFound, deliver(t, bare, payload, whsec, time.Now()).Status)
	})

	// A charge whose answer was lost is settled by Stripe's event alone: the key
	// finishes, and the retry replays it without a single call to Stripe.
	t.Run("WebhookSettlesALostAnswerWithoutCallingStripe", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setupWith(t, testutil.ServiceOptions{Workers: quietCompleter})
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "lost", visa), http.StatusServiceUnavailable, "processor-unavailable")
		pis := svc.Stripe.PaymentIntents()
		require.Len(t, pis, 1)
		requests := svc.Stripe.Stats().CreateRequests

		_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+pis[0].ID), time.Now())
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		resp := svc.PostPayment(t, bundle.apiKey, "lost", visa)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
		require.Equal(t, pis[0].ID, *decode[payment](t, resp).StripePaymentIntentID)
		require.Equal(t, requests, svc.Stripe.Stats().CreateRequests, "no call to Stripe after the event")
		require.Equal(t, 1, receipts(t, svc))
	})

	// A key parked for an operator leaves the queue when Stripe's event settles
	// it; the event, delivered five times at once, takes effect once.
	t.Run("WebhookSettlesAParkedKeyOnceUnderConcurrentDeliveries", func(t *testing.T) {
		t.Parallel()
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em, Workers: quietCompleter})
		em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "parked", visa), http.StatusServiceUnavailable, "needs-attention")
		// What the refused key had in fact created, made by hand here.
		in := intentOf(t, svc, bundle.userID, "parked")
		pi := plant(t, em, 2000, in.Metadata())

		_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+pi.ID), time.Now())
		var wg sync.WaitGroup
		statuses := make([]int, 5)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(payload), Secret: whsec, Timestamp: time.Now()})
				req, _ := http.NewRequest(http.MethodPost, svc.URL+"/webhooks/stripe", strings.NewReader(payload))
				req.Header.Set("Stripe-Signature", signed.Header)
				if resp, err := svc.Client.Do(req); err == nil {
					statuses[i] = resp.StatusCode
					resp.Body.Close()
				}
			}()
		}
		wg.Wait()
		require.Equal(t, []int{200, 200, 200, 200, 200}, statuses)
		require.Equal(t, 1, countEvents(t, svc, "WHERE outcome = 'applied'"))
		var audits int
		require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT count(*) FROM audit_records WHERE action = 'payment.succeeded'").Scan(&audits))
		require.Equal(t, 1, audits, "applied once")
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
		resp := svc.PostPayment(t, bundle.apiKey, "parked", visa)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Equal(t, pi.ID, *decode[payment](t, resp).StripePaymentIntentID)
	})

	// Refund events arrive out of order: an older one never overwrites a newer
	// status, and a refund that fails gives its amount back.
	t.Run("WebhookRefundEventsOutOfOrder", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")
		require.NoError(t, svc.Stripe.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		resp := postRefund(t, svc, bundle.apiKey, "r1", p.ID, `{"amount": 800}`)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		r := decode[refund](t, resp)
		require.Equal(t, "pending", r.Status)
		pending := stripeObject(t, svc, "/v1/refunds/"+*r.StripeRefundID)
		_, err := svc.Stripe.SetRefundStatus(*r.StripeRefundID, stripefake.RefundSucceeded, "")
		require.NoError(t, err)
		succeeded := stripeObject(t, svc, "/v1/refunds/"+*r.StripeRefundID)
		_, err = svc.Stripe.SetRefundStatus(*r.StripeRefundID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
		require.NoError(t, err)
		failed := stripeObject(t, svc, "/v1/refunds/"+*r.StripeRefundID)

		t0 := time.Now().Add(-time.Hour)
		getRefund := func() refund {
			return decode[refund](t, svc.Do(t, http.MethodGet, "/refunds/"+r.ID, "", "Authorization", "Bearer "+bundle.apiKey))
		}
		_, newer := event("refund.updated", succeeded, t0.Add(2*time.Minute))
		_, older := event("refund.updated", pending, t0.Add(time.Minute))
		require.Equal(t, http.StatusOK, deliver(t, svc, newer, whsec, time.Now()).Status)
		require.Equal(t, http.StatusOK, deliver(t, svc, older, whsec, time.Now()).Status)
		require.Equal(t, "succeeded", getRefund().Status, "the older pending event changed nothing")
		require.EqualValues(t, 800, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])

		_, failure := event("refund.updated", failed, t0.Add(4*time.Minute))
		_, stale := event("refund.updated", succeeded, t0.Add(3*time.Minute))
		require.Equal(t, http.StatusOK, deliver(t, svc, failure, whsec, time.Now()).Status)
		require.Equal(t, http.StatusOK, deliver(t, svc, stale, whsec, time.Now()).Status)
		require.Equal(t, "failed", getRefund().Status)
		require.EqualValues(t, 0, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"], "the failed refund gave its amount back")
		again := postRefund(t, svc, bundle.apiKey, "r2", p.ID, `{}`)
		require.EqualValues(t, 2000, decode[refund](t, again).Amount, "all of it is refundable again")
		require.Equal(t, 2, countEvents(t, svc, "WHERE outcome = 'ignored'"))
	})

	t.Run("WebhookDisputeMarksThePayment", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")
		require.Equal(t, false, getPaymentOf(t, svc, bundle.apiKey, p.ID)["disputed"])
		dispute := fmt.Sprintf(`{"id":"dp_1","object":"dispute","amount":2000,"currency":"usd","payment_intent":%q,"reason":"fraudulent","status":"needs_response"}`,
			*p.StripePaymentIntentID)
		_, payload := event("charge.dispute.created", dispute, time.Now())
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
		require.Equal(t, true, getPaymentOf(t, svc, bundle.apiKey, p.ID)["disputed"])
		// Unknown here: recorded as ignored, with its reason.
		_, unknown := event("charge.dispute.created", strings.Replace(dispute, *p.StripePaymentIntentID, "pi_unknown", 1), time.Now())
		require.Equal(t, http.StatusOK, deliver(t, svc, unknown, whsec, time.Now()).Status)
		var reason string
		require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT reason FROM stripe_events WHERE outcome = 'ignored'").Scan(&reason))
		require.Contains(t, reason, "pi_unknown")
	})
}

// stripeObject reads an object from the emulator as Stripe's raw JSON.
func stripeObject(t *testing.T, svc *testutil.Service, path string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, svc.StripeURL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk_test_reader")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	return string(body)
}

// event is a Stripe event of type about object, created at created.
func event(typ, object string, created time.Time) (id, payload string) {
	id = fmt.Sprintf("evt_test%06d", eventSeq.Add(1))
	return id, fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2024-06-20","created":%d,"type":%q,"livemode":false,"pending_webhooks":1,"data":{"object":%s}}`,
		id, created.Unix(), typ, object)
}

// deliver posts payload signed with secret at signedAt.
func deliver(t testing.TB, svc *testutil.Service, payload, secret string, signedAt time.Time) *testutil.Response {
	t.Helper()
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: []byte(payload), Secret: secret, Timestamp: signedAt})
	return svc.Do(t, http.MethodPost, "/webhooks/stripe", payload, "Stripe-Signature", signed.Header, "Content-Type", "application/json")
}

func countEvents(t *testing.T, svc *testutil.Service, where string) int {
	t.Helper()
	var n int
	require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT count(*) FROM stripe_events "+where).Scan(&n))
	return n
}
