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
