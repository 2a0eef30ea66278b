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

// TestAttackSecondRefundSucceededForARefundRecordedFailedReopensItsKey: a
// refund whose outcome was unknown (its answer lost, stripe_refund_id
// NULL) is settled by the refund.updated of Refund re_A, which failed: the
// key answers "failed" and the reservation is given back. A second Refund
// re_B of the same intent then succeeds: money returned for a refund the
// client was told failed. For a payment the same (declined, then another
// PaymentIntent of its intent succeeds) hands the key back to the
// operator; for a refund, refunds.Settle's "second Refund" check comes
// before the "recorded failed, money moved" one, so the alarm is raised
// but the key keeps answering "failed", and the client, told so, refunds
// again under a new key.
func TestAttackSecondRefundSucceededForARefundRecordedFailedReopensItsKey(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000

	// The refund's answer is lost: Stripe made re_A (pending), the row
	// records no Refund.
	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	em.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer})
	requireProblem(t, postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "processor-unavailable")
	rfs := em.Refunds()
	require.Len(t, rfs, 1)
	reA := rfs[0].ID

	// re_A fails; its event settles the refund as failed.
	_, err := em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now())
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
	require.Equal(t, []string{"applied"}, eventOutcomes(t, svc))
	told := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, told.Status, "body: %s", told.Body)
	require.Equal(t, "failed", decode[refund](t, told).Status, "the client is told the refund failed")

	// A second Refund of the intent succeeds: the money went back.
	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{}))
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	_, payload = event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	resp := deliver(t, svc, payload, whsec, time.Now())
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))

	// The customer got 600 back; the key must no longer say "failed".
	var parked bool
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT needs_attention_at IS NOT NULL FROM idempotency_keys WHERE id = $1", keyID(t, svc, "back")).Scan(&parked))
	replay := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.True(t, parked,
		"Refund %s returned 600 for refund key \"back\", which still answers %d %s (refund failed): the client will refund again",
		reB.ID, replay.Status, replay.Body)
	requireProblem(t, replay, http.StatusServiceUnavailable, "needs-attention")
}

// TestAttackRefundOfALostRefundRowIsAnAlarm: a refund succeeds at Stripe,
// and a failover to an asynchronous standby loses the refund's commits
// (its row, its key, the payment's amounts). The Refund's events, which
// carry the refund's intent in their metadata, find no refund: money
// returned that no row records. For a PaymentIntent the same is an alarm
// ("a second charge, or one whose payment was lost"); for a Refund it is
// only "ignored", so nothing tells anyone unless the client happens to
// retry the key.
func TestAttackRefundOfALostRefundRowIsAnAlarm(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay")

	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
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
	require.EqualValues(t, 0, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"])
	require.Contains(t, string(resp.Body), `"alarm":true`,
		"Refund %s of this deployment returned 600 that no refund records; the event was %q: %q",
		reA, eventOutcomes(t, svc), lastEventReason(t, svc))
}
