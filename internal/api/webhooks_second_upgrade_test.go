package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestWebhookSecondRefundHandedOverBeforeMigration30AnswersFailed: the
// case of TestWebhookRecordedRefundFailingAfterTheOperatorWeighedASecondOne
// for a key handed over for re_B before migration 00030: the database has
// no second_refunds, and the hand-over left only an 'alarm' stripe_events
// row naming re_B, in the words of the code then (93cb3dd). Applying 00030
// must fill second_refunds in from that row: otherwise, once the operator
// resolves by re_A, as told, and re_A fails, moneyMoved finds no second
// Refund, the refund is recorded failed and its 600 given back, and a new
// refund of 600 goes to Stripe: the customer gets 1200 for 600.
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

	id := keyID(t, svc, "back")
	_, err = svc.App.Resolve(ctx, id, reA)
	require.NoError(t, err)
	_, err = em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
	reason := lastEventReason(t, svc)

	// re_B returned the 600: the refund is not answered failed (a client
	// told so would refund again under a new key), its 600 stays held, and
	// the key is the operator's again.
	told := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	var status string
	var parked bool
	require.NoError(t, svc.Pool.QueryRow(ctx, `SELECT r.status, k.needs_attention_at IS NOT NULL
		FROM refunds r JOIN idempotency_keys k ON k.id = r.idempotency_key_id WHERE r.id = $1`, refundID).Scan(&status, &parked))
	reserved := getPaymentOf(t, svc, apiKey, p.ID)["amount_reserved"]
	require.True(t, parked && status != "failed" && told.Status == http.StatusServiceUnavailable,
		"key %d was handed over for %s (succeeded, 600) before 00030; %s then failed (%q): refund %d is %s, payment "+
			"reserving %v, the key parked %t, and key \"back\" answers %d %s: a client told the refund failed refunds "+
			"600 again, which %s returned already",
		id, reB.ID, reA, reason, refundID, status, reserved, parked, told.Status, told.Body, reB.ID)
}
