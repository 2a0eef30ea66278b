package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestWebhookRecordedRefundFailingThenTheSecondLeavesNoWayOut: refund key
// "back" succeeded with Refund re_A (600 counted refunded). A second Refund
// re_B of its intent, pending, parks the key; the operator resolves it as
// refunded by re_A, as told. re_A then fails (succeeded to failed): re_B
// was returning the money, so the refund stays succeeded and the key goes
// back to the operator (ownFailedBesideSeconds). re_B then fails too:
// nothing was returned to the customer. The operator is told to resolve it
// "as not refunded if it failed too", but a refund recorded succeeded is
// never moved out of succeeded by an operator (RefundRecordOutcome), re_A
// and re_B are failed (Charged refuses both), and re_A's redelivered event
// meets a key parked for a conflict: the refund answers succeeded, the
// payment counts 600 refunded that nobody returned, and the key is 503 for
// ever.
func TestWebhookRecordedRefundFailingThenTheSecondLeavesNoWayOut(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000

	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
	require.Equal(t, "succeeded", decode[refund](t, created).Status)
	reA := *decode[refund](t, created).StripeRefundID

	// re_B, pending, parks the key; the operator resolves by re_A.
	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	require.Equal(t, "pending", string(reB.Status))
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	id := keyID(t, svc, "back")
	_, err := svc.App.Resolve(context.Background(), id, reA)
	require.NoError(t, err)

	// re_A fails: the key is handed back, the refund stays succeeded.
	_, err = em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
	require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	told := lastEventReason(t, svc)

	// re_B fails too: nothing was returned.
	_, err = em.SetRefundStatus(reB.ID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(3*time.Second))
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)

	// Every way out: the operator as told, then re_A's event again.
	_, errNot := svc.App.Resolve(context.Background(), id, "")
	_, errA := svc.App.Resolve(context.Background(), id, reA)
	_, errB := svc.App.Resolve(context.Background(), id, reB.ID)
	_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(4*time.Second))
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)

	var status string
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT status FROM refunds WHERE payment_id = $1", rowID(t, svc, p.ID)).Scan(&status))
	refunded := getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"]
	replay := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	var returned int64
	for _, rf := range em.Refunds() {
		if rf.Status != stripefake.RefundFailed {
			returned += rf.Amount
		}
	}
	require.False(t, status == "succeeded" && returned == 0,
		"%s and %s both failed (Stripe returned %d), yet refund \"back\" stays %s, the payment counts amount_refunded %v, "+
			"and key %d answers %d %s for good. The operator was told %q; resolve not-refunded: %v; by %s: %v; by %s: %v; "+
			"%s's event again: %q",
		reA, reB.ID, returned, status, refunded, id, replay.Status, replay.Body, told, errNot, reA, errA, reB.ID, errB,
		reA, lastEventReason(t, svc))
}
