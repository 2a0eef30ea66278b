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
