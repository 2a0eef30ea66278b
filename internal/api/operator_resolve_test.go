package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

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

// Defect: "not charged" was refused only for a PaymentIntent that had
// succeeded. One still processing passed; it succeeded afterwards, and the
// client, told "not charged", paid again under a new key. Now the operator
// is refused while any PaymentIntent of the intent may still charge, and
// Stripe's word settles the key when it comes.
func TestOperatorNotChargedRefusedWhileAPaymentIntentProcesses(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
	requireProblem(t, svc.PostPayment(t, apiKey, "slow", visa), http.StatusServiceUnavailable, "needs-attention")
	// What the key had in fact sent: a charge that settles later.
	params := &stripe.PaymentIntentParams{
		Amount: stripe.Int64(2000), Currency: stripe.String("usd"),
		PaymentMethod: stripe.String("pm_card_processing"), Confirm: stripe.Bool(true),
	}
	for k, v := range intentOf(t, svc, userID, "slow").Metadata() {
		params.AddMetadata(k, v)
	}
	pi, err := stripeClient(em).PaymentIntents.New(params)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusProcessing, pi.Status)

	_, err = svc.App.Resolver.NotCharged(context.Background(), keyID(t, svc, "slow"))
	require.ErrorIs(t, err, payments.ErrResolutionRefused)
	require.Contains(t, err.Error(), "processing")

	_, err = em.SetPaymentIntentStatus(pi.ID, stripefake.StatusSucceeded, "")
	require.NoError(t, err)
	_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+pi.ID), time.Now())
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
	resp := svc.PostPayment(t, apiKey, "slow", visa)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	require.Equal(t, pi.ID, *decode[payment](t, resp).StripePaymentIntentID)
}

// Defect (found after 5e2cf9d): "not refunded" had no wait for a create the
// key's last run may have sent, which Stripe may still be executing.
func TestOperatorNotRefundedWaitsOutACreateStillExecuting(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{
		Stripe: payments.StripeConfig{ExecutionBound: time.Hour}, Workers: quietCompleter,
	})
	_, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay")
	svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
	requireProblem(t, postRefund(t, svc, apiKey, "just-sent", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")

	_, err := svc.App.Resolve(context.Background(), keyID(t, svc, "just-sent"), "")
	require.Error(t, err, "the key's last run sent a refund create a moment ago; Stripe may still be executing it")
}

// Found after 70e3608: a failover loses a finished payment of 2000, and the
// client sends its key again for 3000. Stripe refuses the intent's key
// (idempotency_error: other parameters) and the key parks. "Charged" by the
// 2000 PaymentIntent is refused (another amount), and "not charged" was
// refused too (a PaymentIntent of the intent succeeded): stranded. That
// PaymentIntent is the earlier request's; this one's was never made.
func TestOperatorSettlesALostKeySentAgainForAnotherAmount(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)
	first := paid(t, svc, apiKey, "changed")
	forgetEverything(t, svc)

	other := `{"amount": 3000, "currency": "usd", "payment_method": "pm_card_visa", "description": "order 1"}`
	requireProblem(t, svc.PostPayment(t, apiKey, "changed", other), http.StatusServiceUnavailable, "needs-attention")
	id := keyID(t, svc, "changed")
	_, err := svc.App.Resolver.Charged(context.Background(), id, *first.StripePaymentIntentID)
	require.ErrorIs(t, err, payments.ErrResolutionRefused, "the 2000 charge is not this request's")
	settled, err := svc.App.Resolver.NotCharged(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, settled.Status)
	requireProblem(t, svc.PostPayment(t, apiKey, "changed", other), http.StatusBadRequest, "payment-rejected")
	require.Len(t, em.PaymentIntents(), 1)
}
