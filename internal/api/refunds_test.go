package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestRefunds covers POST /payments/{id}/refunds and GET /refunds/{id}.
func TestRefunds(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		userID int64
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		svc := testutil.StartService(t, testutil.ServiceOptions{})
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, userID: userID}
	}

	t.Run("RefundPartThenTheRestThenNoMore", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")

		first := postRefund(t, svc, bundle.apiKey, "r1", p.ID, `{"amount": 500, "reason": "requested_by_customer"}`)
		require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
		r1 := decode[refund](t, first)
		require.Equal(t, refund{ID: r1.ID, PaymentID: p.ID, Amount: 500, Currency: "usd", Status: "succeeded",
			Reason: r1.Reason, StripeRefundID: r1.StripeRefundID}, r1)
		require.Equal(t, "requested_by_customer", *r1.Reason)
		require.Equal(t, "/refunds/"+r1.ID, first.Header.Get("Location"))
		got := svc.Do(t, http.MethodGet, first.Header.Get("Location"), "", "Authorization", "Bearer "+bundle.apiKey)
		require.Equal(t, http.StatusOK, got.Status)
		require.JSONEq(t, string(first.Body), string(got.Body))
		require.EqualValues(t, 500, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])

		replay := postRefund(t, svc, bundle.apiKey, "r1", p.ID, `{"reason": "requested_by_customer", "amount": 500}`)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(first.Body), string(replay.Body))

		rest := postRefund(t, svc, bundle.apiKey, "r2", p.ID, `{}`)
		require.Equal(t, http.StatusCreated, rest.Status, "body: %s", rest.Body)
		require.EqualValues(t, 1500, decode[refund](t, rest).Amount, "no amount: all that remains")
		require.EqualValues(t, 2000, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])

		more := postRefund(t, svc, bundle.apiKey, "r3", p.ID, `{"amount": 1}`)
		prob := requireProblem(t, more, http.StatusBadRequest, "refund-exceeds-payment")
		require.Equal(t, p.ID, prob.PaymentID)
		again := postRefund(t, svc, bundle.apiKey, "r3", p.ID, `{"amount": 1}`)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"), "a refusal is stored")

		refunds := svc.Stripe.Refunds()
		require.Len(t, refunds, 2)
		var total int64
		for _, r := range refunds {
			total += r.Amount
		}
		require.EqualValues(t, 2000, total, "Stripe was never asked for more than the payment")
	})

	// Twenty concurrent refunds of a tenth of a payment, each under its own
	// key: exactly ten are made, ten are refused, and Stripe refunds exactly
	// the payment.
	t.Run("ConcurrentRefundsNeverOverRefund", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")

		var waits []func() *testutil.Response
		for i := range 20 {
			waits = append(waits, testutil.Go(t, func(t testing.TB) *testutil.Response {
				return postRefund(t, svc, bundle.apiKey, fmt.Sprintf("tenth-%d", i), p.ID, `{"amount": 200}`)
			}))
		}
		answers := map[int]int{}
		for _, wait := range waits {
			answers[wait().Status]++
		}
		require.Equal(t, map[int]int{http.StatusCreated: 10, http.StatusBadRequest: 10}, answers)
		require.Len(t, svc.Stripe.Refunds(), 10)
		require.EqualValues(t, 2000, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
		var refused int
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM idempotency_keys WHERE convert_from(response_body, 'UTF8') LIKE '%refund-exceeds-payment%'`).Scan(&refused))
		require.Equal(t, 10, refused, "every refusal is stored as refund-exceeds-payment")
	})

	t.Run("RefundRefusalsAndScope", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		_, otherKey := svc.NewUser(t)
		p := paid(t, svc, bundle.apiKey, "pay")

		declined := svc.PostPayment(t, bundle.apiKey, "declined", `{"amount": 900, "currency": "usd", "payment_method": "pm_card_chargeDeclined"}`)
		require.Equal(t, http.StatusPaymentRequired, declined.Status)
		failedID := decode[problemBody](t, declined).PaymentID
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "of-declined", failedID, `{}`), http.StatusBadRequest, "payment-not-refundable")

		// Another user's payment, or none: 404, and nothing stored, so the key
		// stays free for the caller's own payment.
		requireProblem(t, postRefund(t, svc, otherKey, "mine", p.ID, `{}`), http.StatusNotFound, "not-found")
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "nowhere", ids.Format(ids.Payment, ids.New()), `{}`), http.StatusNotFound, "not-found")
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "nowhere", "999999", `{}`), http.StatusNotFound, "not-found")
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "nowhere", p.ID, `{"amount": 100}`).Status)

		// One key and body sent to two payments are two requests.
		p2 := paid(t, svc, bundle.apiKey, "pay-2")
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "nowhere", p2.ID, `{"amount": 100}`), http.StatusUnprocessableEntity, "idempotency-key-reused")
		// The digest covers the path as sent, which the router reads: the same
		// id written with escapes is no id, and is refused, not replayed.
		var escaped strings.Builder
		for _, c := range p.ID {
			fmt.Fprintf(&escaped, "%%%02X", c)
		}
		requireProblem(t, svc.Do(t, http.MethodPost, "/payments/"+escaped.String()+"/refunds", `{"amount": 100}`,
			"Authorization", "Bearer "+bundle.apiKey, "Idempotency-Key", "nowhere", "Content-Type", "application/json"),
			http.StatusBadRequest, "invalid-request")

		for _, body := range []string{`{"amount": 0}`, `{"amount": "5"}`, `{"reason": "because"}`, `{"tip": 1}`, `[]`} {
			requireProblem(t, postRefund(t, svc, bundle.apiKey, "bad", p.ID, body), http.StatusBadRequest, "invalid-request")
		}
		requireProblem(t, svc.Do(t, http.MethodPost, "/payments/abc/refunds", `{}`, "Authorization", "Bearer "+bundle.apiKey,
			"Idempotency-Key", "bad", "Content-Type", "application/json"), http.StatusBadRequest, "invalid-request")
		require.Len(t, svc.Stripe.Refunds(), 1)
	})

	// A refund's indeterminate 500 that did refund is adopted, never made twice;
	// a refund that fails at Stripe gives its amount back.
	t.Run("RefundOutcomesFromStripe", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")

		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged})
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "r1", p.ID, `{"amount": 700}`), http.StatusServiceUnavailable, "processor-unavailable")
		require.Len(t, svc.Stripe.Refunds(), 1, "the 500 did refund")
		resp := postRefund(t, svc, bundle.apiKey, "r1", p.ID, `{"amount": 700}`)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Equal(t, svc.Stripe.Refunds()[0].ID, *decode[refund](t, resp).StripeRefundID)
		require.Len(t, svc.Stripe.Refunds(), 1, "adopted, not made twice")

		// A pending refund holds its amount: it counts against the payment,
		// though Stripe has not refunded it yet.
		require.NoError(t, svc.Stripe.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		pending := postRefund(t, svc, bundle.apiKey, "r2", p.ID, `{"amount": 600}`)
		require.Equal(t, http.StatusCreated, pending.Status, "body: %s", pending.Body)
		require.Equal(t, "pending", decode[refund](t, pending).Status)
		require.EqualValues(t, 700, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
		require.NoError(t, svc.Stripe.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{}))

		// Refunded behind our back (in Stripe's dashboard, say): Stripe refuses
		// more than it holds, the refusal is stored, and the refused refund
		// gives its amount back.
		behind := &stripe.RefundParams{PaymentIntent: p.StripePaymentIntentID, Amount: stripe.Int64(500)}
		_, err := stripeClient(&testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL}).Refunds.New(behind)
		require.NoError(t, err)
		refused := postRefund(t, svc, bundle.apiKey, "r3", p.ID, `{}`)
		prob := requireProblem(t, refused, http.StatusBadRequest, "refund-rejected")
		require.Equal(t, p.ID, prob.PaymentID)
		rest := postRefund(t, svc, bundle.apiKey, "r4", p.ID, `{"amount": 200}`)
		require.Equal(t, http.StatusCreated, rest.Status, "the refused 700 was given back; body: %s", rest.Body)
		require.EqualValues(t, 900, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])
	})

	// Defect: a refund of a charged-back payment (a dispute Stripe opened as
	// needs_response, is_charge_refundable false) was answered 400
	// refund-rejected, "Stripe refused the refund as invalid", with Stripe's
	// own message naming its charge: a client could not tell a chargeback
	// (the cardholder has the money back already; never refund it another
	// way) from a request it got wrong. Now it is payment-charged-back,
	// stored and replayed, its reserved amount given back, nothing refunded.
	t.Run("RefundOfAChargedBackPaymentIsRefused", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		ctx := context.Background()
		p := paid(t, svc, bundle.apiKey, "pay")
		d, err := svc.Stripe.OpenDispute(*p.StripePaymentIntentID, "")
		require.NoError(t, err)
		require.Equal(t, stripefake.DisputeStatusNeedsResponse, d.Status)

		refused := postRefund(t, svc, bundle.apiKey, "r1", p.ID, `{"amount": 500}`)
		prob := requireProblem(t, refused, http.StatusBadRequest, "payment-charged-back")
		got := decode[map[string]any](t, refused)
		refundID, _ := got["refund_id"].(string)
		require.NotEmpty(t, refundID, "body: %s", refused.Body)
		require.JSONEq(t, `{
			"type": "https://paymentsd.dev/problems/payment-charged-back",
			"title": "Payment charged back",
			"status": 400,
			"detail": "Payment `+p.ID+` was charged back: the cardholder's bank took its amount back through a dispute, so it cannot be refunded as well. Nothing was refunded.",
			"payment_id": "`+p.ID+`",
			"refund_id": "`+refundID+`",
			"processor_code": "charge_disputed"
		}`, string(refused.Body))
		require.Equal(t, p.ID, prob.PaymentID)

		// Stored: the key replays the same answer.
		replay := postRefund(t, svc, bundle.apiKey, "r1", p.ID, `{"amount": 500}`)
		require.Equal(t, http.StatusBadRequest, replay.Status)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(refused.Body), string(replay.Body))

		// The refund is recorded failed, and its amount given back.
		rf := decode[refund](t, svc.Do(t, http.MethodGet, "/refunds/"+refundID, "", "Authorization", "Bearer "+bundle.apiKey))
		require.Equal(t, refund{ID: refundID, PaymentID: p.ID, Amount: 500, Currency: "usd", Status: "failed"}, rf)
		var reserved int64
		require.NoError(t, svc.Pool.QueryRow(ctx, "SELECT amount_reserved FROM payments WHERE id = $1", rowID(t, svc, p.ID)).Scan(&reserved))
		require.Zero(t, reserved)
		require.EqualValues(t, 0, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])

		// All that remains, under another key: refused the same way.
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "r2", p.ID, `{}`), http.StatusBadRequest, "payment-charged-back")
		require.Empty(t, svc.Stripe.Refunds(), "no money moved")
		require.Len(t, svc.Stripe.Disputes(), 1)
	})

	// Defect: a refund of a payment whose charge was still being decided was
	// refused for good (400 payment-not-refundable, stored). After a failover
	// to an asynchronous standby lost a payment's last commits, the payment was
	// pending again while its client held the 201, and the refusal stored for
	// the client's refund contradicted the refund Stripe had already made under
	// the same key (make chaos-failover, async). Now nothing is stored: the
	// client retries until the payment is settled.
	t.Run("RefundOfAPendingPaymentIsRetriedNotRefused", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		ctx := context.Background()

		// Charged, but the answer was lost: the payment stays pending.
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "pay", visa), http.StatusServiceUnavailable, "processor-unavailable")
		var public uuid.UUID
		require.NoError(t, svc.Pool.QueryRow(ctx, "SELECT public_id FROM payments WHERE idempotency_key_id = $1",
			keyID(t, svc, "pay")).Scan(&public))
		paymentID := ids.Format(ids.Payment, public)

		resp := postRefund(t, svc, bundle.apiKey, "refund", paymentID, `{}`)
		requireProblem(t, resp, http.StatusConflict, "idempotency-key-in-use")
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
		var stored int
		require.NoError(t, svc.Pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys WHERE idempotency_key = 'refund'").Scan(&stored))
		require.Zero(t, stored, "no answer is stored for the refund")
		require.Empty(t, svc.Stripe.Refunds())

		// Once the payment is settled, the same key refunds it.
		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "pay", visa).Status)
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "refund", paymentID, `{}`).Status)
		require.Len(t, svc.Stripe.Refunds(), 1)
	})
}
