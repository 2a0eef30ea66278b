package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestAttack25cResolveByAPendingSecondRefundUnrefundsASucceededRefund:
// refund key "back" succeeded with Refund re_A (600 returned, counted in
// amount_refunded). A second Refund re_B of its intent, pending, parks the
// key for a conflict, and the alarm tells the operator to "resolve it as
// refunded by re_B or re_A, as the truth is". Resolving by re_B (pending)
// is accepted and, by_operator, moves the refund succeeded -> pending:
// amount_refunded drops by 600 though re_A returned the money. When re_B
// then fails, the refund is failed, its 600 given back: the books say
// nothing was refunded, and 2000 is refundable again.
func TestAttack25cResolveByAPendingSecondRefundUnrefundsASucceededRefund(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000

	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
	first := decode[refund](t, created)
	require.Equal(t, "succeeded", first.Status)
	reA := *first.StripeRefundID
	require.EqualValues(t, 600, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"])

	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	resp := deliver(t, svc, payload, whsec, time.Now())
	require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	require.Contains(t, lastEventReason(t, svc), reA)
	id := keyID(t, svc, "back")
	requireProblem(t, postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")

	// The operator follows the alarm's words: "refunded by re_B".
	_, err := svc.App.Resolve(context.Background(), id, reB.ID)
	t.Logf("resolve by pending %s: err=%v", reB.ID, err)
	require.EqualValues(t, 600, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"],
		"Refund %s returned 600 and succeeded; resolving its key by pending Refund %s took the 600 out of amount_refunded", reA, reB.ID)

	// re_B fails: nothing of the 600 re_A returned is left in the books.
	_, err = em.SetRefundStatus(reB.ID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(2*time.Second))
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
	require.EqualValues(t, 600, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"],
		"re_A returned 600, the books say %v", getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"])
}

// TestAttack25cResolutionOfASecondRefundDoesNotStick: refund key "back"
// succeeded with Refund re_A; a second Refund re_B of its intent succeeded
// too, and its refund.created parked the key for a conflict. The operator
// weighs it and resolves the key as refunded by re_A. Stripe sends, for
// the same change of re_B, charge.refund.updated as well (another event
// id, no news): it parks the settled key again, and the client's replay is
// 503 again, needs-attention gauge back to 1. Every later event of re_B
// undoes the operator's settling.
func TestAttack25cResolutionOfASecondRefundDoesNotStick(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000

	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
	reA := *decode[refund](t, created).StripeRefundID

	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
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
	require.Equal(t, http.StatusCreated, postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`).Status)

	// The same change of re_B, as charge.refund.updated.
	_, payload = event("charge.refund.updated", object, time.Now().Add(time.Second))
	resp = deliver(t, svc, payload, whsec, time.Now())
	require.Equal(t, http.StatusOK, resp.Status)
	t.Logf("charge.refund.updated of %s: %s (%s)", reB.ID, resp.Body, lastEventReason(t, svc))
	replay := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, replay.Status,
		"the operator settled key %d as refunded by %s; another event of %s, no news, parked it again: %s", id, reA, reB.ID, replay.Body)
	requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
}

// TestAttack25cOneRefundResolvesTwoKeysIsARefusal: two refund keys of one
// payment, 600 each, await an operator. A Refund made in the Dashboard (no
// metadata) of 600 settles the first. Offered for the second too, it must
// be refused as a resolution (ErrResolutionRefused, saying refund N
// records it), not fail on refunds_stripe_refund_id_key.
func TestAttack25cOneRefundResolvesTwoKeysIsARefusal(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay")
	for _, k := range []string{"k1", "k2"} {
		em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, postRefund(t, svc, apiKey, k, p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
	}
	reX := secondRefund(t, em, *p.StripePaymentIntentID, 600, nil)
	_, err := svc.App.Resolve(context.Background(), keyID(t, svc, "k1"), reX.ID)
	require.NoError(t, err)
	_, err = svc.App.Resolve(context.Background(), keyID(t, svc, "k2"), reX.ID)
	require.ErrorIs(t, err, payments.ErrResolutionRefused, "got %v", err)
}
