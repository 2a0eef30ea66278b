package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// Defect: an operator could settle a key as not charged right after its
// last run sent a create, which Stripe may still be executing: what it
// makes would not be listed yet. "Not charged" now waits until no create
// of the key's last run can still be executing.
func TestOperatorNotChargedWaitsOutACreateStillExecuting(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{
		Stripe: payments.StripeConfig{ExecutionBound: time.Hour}, Workers: quietCompleter,
	})
	_, apiKey := svc.NewUser(t)
	svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
	requireProblem(t, svc.PostPayment(t, apiKey, "just-sent", visa), http.StatusServiceUnavailable, "needs-attention")

	_, err := svc.App.Resolver.NotCharged(context.Background(), keyID(t, svc, "just-sent"))
	require.ErrorIs(t, err, payments.ErrResolutionRefused)
	require.Contains(t, err.Error(), "still executing")
	requireProblem(t, svc.PostPayment(t, apiKey, "just-sent", visa), http.StatusServiceUnavailable, "needs-attention")
}
