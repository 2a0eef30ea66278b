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

// TestWebhookSecondRefundHandedOverBeforeMigration30AnswersFailed: the
// case of TestWebhookRecordedRefundFailingAfterTheOperatorWeighedASecondOne
// for a key handed over for re_B before migration 00030: its refund has
// second_refunds NULL (the migration fills nothing in, though every such
// hand-over left an 'alarm' stripe_events row naming re_B). The operator
// resolves by re_A, as told; re_A fails. moneyMoved finds no second Refund,
// the refund is recorded failed and its 600 given back, and a new refund of
// 600 goes to Stripe: the customer gets 1200 for 600.
func TestWebhookSecondRefundHandedOverBeforeMigration30AnswersFailed(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000

	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
	reA := *decode[refund](t, created).StripeRefundID

	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{}))
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	// As 93cb3dd handed it over: the alarm row, no second_refunds.
	_, err := svc.Pool.Exec(context.Background(), "UPDATE refunds SET second_refunds = NULL")
	require.NoError(t, err)

	id := keyID(t, svc, "back")
	_, err = svc.App.Resolve(context.Background(), id, reA)
	require.NoError(t, err)
	_, err = em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
	reason := lastEventReason(t, svc)

	told := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	again := postRefund(t, svc, apiKey, "again", p.ID, `{"amount": 600}`)
	var returned int64
	for _, rf := range em.Refunds() {
		if rf.Status != stripefake.RefundFailed {
			returned += rf.Amount
		}
	}
	require.LessOrEqual(t, returned, int64(600),
		"key %d was handed over for %s (succeeded, 600) before 00030; %s then failed (%q) and key \"back\" answers %d %s; "+
			"a new refund of 600 answered %d: Stripe returned %d for one refund of 600",
		id, reB.ID, reA, reason, told.Status, told.Body, again.Status, returned)
}
