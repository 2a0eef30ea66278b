package api_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// Defect: a refund of a payment whose charge was still being decided was
// refused for good (400 payment-not-refundable, stored). After a failover
// to an asynchronous standby lost a payment's last commits, the payment was
// pending again while its client held the 201, and the refusal stored for
// the client's refund contradicted the refund Stripe had already made under
// the same key (make chaos-failover, async). Now nothing is stored: the
// client retries until the payment is settled.
func TestRefundOfAPendingPaymentIsRetriedNotRefused(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	ctx := context.Background()

	// Charged, but the answer was lost: the payment stays pending.
	svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer})
	requireProblem(t, svc.PostPayment(t, apiKey, "pay", visa), http.StatusServiceUnavailable, "processor-unavailable")
	var public uuid.UUID
	require.NoError(t, svc.Pool.QueryRow(ctx, "SELECT public_id FROM payments WHERE idempotency_key_id = $1",
		keyID(t, svc, "pay")).Scan(&public))
	paymentID := ids.Format(ids.Payment, public)

	resp := postRefund(t, svc, apiKey, "refund", paymentID, `{}`)
	requireProblem(t, resp, http.StatusConflict, "idempotency-key-in-use")
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	var stored int
	require.NoError(t, svc.Pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys WHERE idempotency_key = 'refund'").Scan(&stored))
	require.Zero(t, stored, "no answer is stored for the refund")
	require.Empty(t, svc.Stripe.Refunds())

	// Once the payment is settled, the same key refunds it.
	require.Equal(t, http.StatusCreated, svc.PostPayment(t, apiKey, "pay", visa).Status)
	require.Equal(t, http.StatusCreated, postRefund(t, svc, apiKey, "refund", paymentID, `{}`).Status)
	require.Len(t, svc.Stripe.Refunds(), 1)
}
