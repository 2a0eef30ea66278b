package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestLateRefundEventsNeverOverwriteANewerState: Stripe delivers events
// late, twice and out of order. A refund whose flow learned its final state
// by a lookup (its create's answer was a 500 that did refund) is recorded
// failed; the Refund's earlier events, delivered afterwards, say pending or
// succeeded. They are older than what the flow recorded (a Refund never
// goes back from failed), so they change nothing: the key keeps its answer,
// no operator is called, and the payment's amounts stay as they are.
func TestLateRefundEventsNeverOverwriteANewerState(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		// outcome is how the Refund starts; fail, when set, fails it
		// afterwards (before the flow's lookup sees it).
		outcome stripefake.RefundOutcome
		fail    bool
		// late is the event type delivered after the flow recorded.
		late string
	}{
		// Found in session 13's review: the flow recorded no status time,
		// so refund.created (pending) looked newer than "failed".
		{name: "CreatedPendingAfterFailed", outcome: stripefake.RefundOutcome{Status: stripefake.RefundPending}, fail: true, late: "refund.created"},
		// pm_card_refundFail: created succeeded, then failed; the
		// succeeded event looked like money moving for a failed refund.
		{name: "CreatedSucceededAfterFailed", outcome: stripefake.RefundOutcome{Status: stripefake.RefundFailed}, late: "refund.created"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			em := heldEventsEmulator(t)
			svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
			_, apiKey := svc.NewUser(t)
			p := paid(t, svc, apiKey, "pay")
			require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, tc.outcome))

			// The create refunds, but its answer is a 500: unknown.
			em.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged, Op: stripefake.OpCreateRefund})
			requireProblem(t, postRefund(t, svc, apiKey, "late", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "processor-unavailable")
			refunds := em.Refunds()
			require.Len(t, refunds, 1)
			if tc.fail {
				_, err := em.SetRefundStatus(refunds[0].ID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
				require.NoError(t, err)
			}

			// The retry finds the key spent and adopts the Refund as it
			// now is: failed.
			answer := postRefund(t, svc, apiKey, "late", p.ID, `{"amount": 600}`)
			require.Equal(t, http.StatusCreated, answer.Status, "body: %s", answer.Body)
			require.Equal(t, "failed", decode[refund](t, answer).Status)
			amounts := func() (reserved, refunded int64) {
				require.NoError(t, svc.Pool.QueryRow(context.Background(),
					"SELECT amount_reserved, amount_refunded FROM payments WHERE id = $1", rowID(t, svc, p.ID)).Scan(&reserved, &refunded))
				return reserved, refunded
			}
			reserved, refunded := amounts()
			require.Zero(t, reserved)
			require.Zero(t, refunded)

			// Every event of the Refund, oldest first, then once more in
			// reverse: none may move it off failed.
			for _, payload := range eventsThereAndBack(t, em, refunds[0].ID) {
				resp := deliver(t, svc, payload, whsec, time.Now())
				require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
				require.NotContains(t, string(resp.Body), `"alarm":true`, "a late %s is older than the failed refund", tc.late)
			}
			requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
			replay := postRefund(t, svc, apiKey, "late", p.ID, `{"amount": 600}`)
			require.Equal(t, http.StatusCreated, replay.Status, "the key keeps its answer; body: %s", replay.Body)
			require.Equal(t, "failed", decode[refund](t, replay).Status)
			reserved, refunded = amounts()
			require.Zero(t, reserved, "the failed refund's 600 was given back once")
			require.Zero(t, refunded)
		})
	}
}

// TestLatePaymentEventsNeverOverwriteANewerState checks payments for the
// same flaw. A payment settled by its lookup (its create's answer was a 500)
// as declined: its PaymentIntent went processing, then failed. Its events,
// delivered afterwards and again in reverse, change nothing: a
// PaymentIntent's only way out of a final state is to succeed, which no
// event older than a recorded state can claim.
func TestLatePaymentEventsNeverOverwriteANewerState(t *testing.T) {
	t.Parallel()
	em := heldEventsEmulator(t)
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)
	processing := `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_processing"}`
	em.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged, Op: stripefake.OpCreatePaymentIntent})
	requireProblem(t, svc.PostPayment(t, apiKey, "slow", processing), http.StatusServiceUnavailable, "processor-unavailable")
	pis := em.PaymentIntents()
	require.Len(t, pis, 1)
	_, err := em.SetPaymentIntentStatus(pis[0].ID, stripefake.StatusRequiresPaymentMethod, "insufficient_funds")
	require.NoError(t, err)
	declined := svc.PostPayment(t, apiKey, "slow", processing)
	require.Equal(t, http.StatusPaymentRequired, declined.Status, "body: %s", declined.Body)

	for _, payload := range eventsThereAndBack(t, em, pis[0].ID) {
		resp := deliver(t, svc, payload, whsec, time.Now())
		require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
		require.NotContains(t, string(resp.Body), `"alarm":true`)
	}
	requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	replay := svc.PostPayment(t, apiKey, "slow", processing)
	require.Equal(t, http.StatusPaymentRequired, replay.Status, "the key keeps its answer; body: %s", replay.Body)
	require.Len(t, em.PaymentIntents(), 1)
}

// heldEventsEmulator is an emulator whose events are held back: their
// endpoint never takes them, so a test delivers them when it likes.
func heldEventsEmulator(t *testing.T) *testutil.Emulator {
	t.Helper()
	held := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(held.Close)
	return testutil.StartEmulator(t, stripefake.Options{WebhookURL: held.URL, WebhookSecret: whsec,
		WebhookBackoff: time.Hour, WebhookMaxBackoff: time.Hour})
}

// eventsThereAndBack is every event the emulator made about objectID, oldest
// first, then again newest first: late, twice and out of order.
func eventsThereAndBack(t *testing.T, em *testutil.Emulator, objectID string) []string {
	t.Helper()
	var payloads []string
	for _, ev := range em.Events() {
		if ev.ObjectID == objectID {
			payloads = append(payloads, string(ev.Payload))
		}
	}
	require.NotEmpty(t, payloads)
	for i := len(payloads) - 1; i >= 0; i-- {
		payloads = append(payloads, payloads[i])
	}
	return payloads
}
