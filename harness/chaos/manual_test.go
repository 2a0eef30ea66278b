package chaos

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// The harness settles the webhooks only once Stripe has canceled every
// authorization whose window ends within the drain bound, so that no
// cancel comes between the settling and the snapshot.
func TestAwaitAuthorizationsEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	// authorized starts an emulator with window and makes one manual
	// PaymentIntent there through stripe-go, as the service does.
	authorized := func(t *testing.T, window time.Duration) (*Emulator, func() string) {
		t.Helper()
		em := testutil.StartEmulator(t, stripefake.Options{AuthorizationWindow: window})
		sc := payments.NewCharger(payments.StripeConfig{SecretKey: "sk_test_chaos", APIBase: em.URL}).Client()
		pi, err := sc.PaymentIntents.New(&stripe.PaymentIntentParams{
			Amount: stripe.Int64(2000), Currency: stripe.String("usd"), PaymentMethod: stripe.String("pm_card_visa"),
			Confirm: stripe.Bool(true), CaptureMethod: stripe.String("manual"),
		})
		require.NoError(t, err)
		require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, pi.Status)
		status := func() string {
			pis := em.PaymentIntents()
			require.Len(t, pis, 1)
			return pis[0].Status
		}
		return &Emulator{Base: em.URL, HTTP: &http.Client{}}, status
	}

	t.Run("WaitsForTheWindowToClose", func(t *testing.T) {
		t.Parallel()
		emu, status := authorized(t, 1500*time.Millisecond)
		start := time.Now()
		require.NoError(t, AwaitAuthorizationsEnded(ctx, emu, 1500*time.Millisecond, time.Minute, NewEvents(io.Discard)))
		require.Equal(t, statusCanceled, status(), "returned after %s", time.Since(start))
	})

	t.Run("DoesNotWaitForAWindowLongerThanTheBound", func(t *testing.T) {
		t.Parallel()
		emu, status := authorized(t, time.Hour)
		start := time.Now()
		require.NoError(t, AwaitAuthorizationsEnded(ctx, emu, time.Hour, time.Minute, NewEvents(io.Discard)))
		require.Less(t, time.Since(start), 10*time.Second)
		require.Equal(t, statusRequiresCapture, status())
	})
}
