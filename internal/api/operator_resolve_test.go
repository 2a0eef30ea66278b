package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestOperatorResolve covers an operator settling a key that needs
// attention (payments.Resolver, App.Resolve): only as what Stripe shows, and
// only once nothing can still change it.
func TestOperatorResolve(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		userID int64
	}

	setupWith := func(t *testing.T, opts testutil.ServiceOptions) (*testutil.Service, *testBundle) {
		t.Helper()
		svc := testutil.StartService(t, opts)
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, userID: userID}
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		return setupWith(t, testutil.ServiceOptions{})
	}

	t.Run("OperatorResolvesAsChargedOnlyWithAMatchingPaymentIntent", func(t *testing.T) {
		t.Parallel()
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em})
		em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "manual", visa), http.StatusServiceUnavailable, "needs-attention")
		id := keyID(t, svc, "manual")

		// Charged by hand in the dashboard, say: no paymentsd metadata.
		wrong := plant(t, em, 1999, nil)
		_, err := svc.App.Resolver.Charged(context.Background(), id, wrong.ID)
		require.ErrorIs(t, err, payments.ErrResolutionRefused)
		_, err = svc.App.Resolver.Charged(context.Background(), id, "pi_doesnotexist")
		require.ErrorIs(t, err, payments.ErrResolutionRefused)
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "manual", visa), http.StatusServiceUnavailable, "needs-attention")

		right := plant(t, em, 2000, nil)
		settled, err := svc.App.Resolver.Charged(context.Background(), id, right.ID)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status)
		replay := svc.PostPayment(t, bundle.apiKey, "manual", visa)
		require.Equal(t, http.StatusCreated, replay.Status)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		got := decode[payment](t, replay)
		require.Equal(t, "succeeded", got.Status)
		require.Equal(t, right.ID, *got.StripePaymentIntentID)
		require.Equal(t, 1, receipts(t, svc), "a resolved charge gets its receipt")

		_, err = svc.App.Resolver.Charged(context.Background(), id, right.ID)
		require.ErrorIs(t, err, phases.ErrNotAwaitingOperator, "settled once")
	})

	// Defect: an operator could settle a key as not charged right after its
	// last run sent a create, which Stripe may still be executing: what it
	// makes would not be listed yet. "Not charged" now waits until no create
	// of the key's last run can still be executing.
	t.Run("OperatorNotChargedWaitsOutACreateStillExecuting", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setupWith(t, testutil.ServiceOptions{
			Stripe: payments.StripeConfig{ExecutionBound: time.Hour}, Workers: quietCompleter,
		})
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "just-sent", visa), http.StatusServiceUnavailable, "needs-attention")

		_, err := svc.App.Resolver.NotCharged(context.Background(), keyID(t, svc, "just-sent"))
		require.ErrorIs(t, err, payments.ErrResolutionRefused)
		require.Contains(t, err.Error(), "still executing")
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "just-sent", visa), http.StatusServiceUnavailable, "needs-attention")
	})

	// Defect: "not charged" was refused only for a PaymentIntent that had
	// succeeded. One still processing passed; it succeeded afterwards, and the
	// client, told "not charged", paid again under a new key. Now the operator
	// is refused while any PaymentIntent of the intent may still charge, and
	// Stripe's word settles the key when it comes.
	t.Run("OperatorNotChargedRefusedWhileAPaymentIntentProcesses", func(t *testing.T) {
		t.Parallel()
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
		em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "slow", visa), http.StatusServiceUnavailable, "needs-attention")
		// What the key had in fact sent: a charge that settles later.
		params := &stripe.PaymentIntentParams{
			Amount: stripe.Int64(2000), Currency: stripe.String("usd"),
			PaymentMethod: stripe.String("pm_card_processing"), Confirm: stripe.Bool(true),
		}
		for k, v := range intentOf(t, svc, bundle.userID, "slow").Metadata() {
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
		resp := svc.PostPayment(t, bundle.apiKey, "slow", visa)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Equal(t, pi.ID, *decode[payment](t, resp).StripePaymentIntentID)
	})

	// Defect: a parked key on a busy account could never be resolved as not
	// charged: the resolver's check listed the account through the lookup's
	// capped listing and failed, and a key that charged nothing stayed parked
	// for ever. Then (70e3608) it stood on search alone, which lags writes. Now
	// it lists only the stretch search may not cover yet, up to the key's last
	// possible send, and goes through once search covers the rest. Search lags
	// a few seconds here, and the service assumes as much.
	t.Run("OperatorResolvesNotChargedOnABusyAccount", func(t *testing.T) {
		t.Parallel()
		const lag = 3 * time.Second
		em := testutil.StartEmulator(t, stripefake.Options{SearchLag: lag})
		// A hundred pages are listed: generous bounds, for a loaded machine.
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em, StripeTimeout: 40 * time.Second,
			RequestTimeout: 60 * time.Second, Workers: quietCompleter,
			Stripe: payments.StripeConfig{SearchLag: lag, LookupLookback: time.Second}})
		em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "parked", visa), http.StatusServiceUnavailable, "needs-attention")
		parkedAt := time.Now()
		require.Empty(t, em.PaymentIntents(), "nothing was charged")
		plantMany(t, em, 10_050)

		time.Sleep(time.Until(parkedAt.Add(lag + 2*time.Second)))
		_, err := svc.App.Resolver.NotCharged(context.Background(), keyID(t, svc, "parked"))
		require.NoError(t, err, "nothing of this intent exists at Stripe; the operator must be able to say so")
	})

	// Found after 70e3608: a failover loses a finished payment of 2000, and the
	// client sends its key again for 3000. Stripe refuses the intent's key
	// (idempotency_error: other parameters) and the key parks. "Charged" by the
	// 2000 PaymentIntent is refused (another amount), and "not charged" was
	// refused too (a PaymentIntent of the intent succeeded): stranded. That
	// PaymentIntent is the earlier request's; this one's was never made.
	t.Run("OperatorSettlesALostKeySentAgainForAnotherAmount", func(t *testing.T) {
		t.Parallel()
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em, Workers: quietCompleter})
		first := paid(t, svc, bundle.apiKey, "changed")
		forgetEverything(t, svc)

		other := `{"amount": 3000, "currency": "usd", "payment_method": "pm_card_visa", "description": "order 1"}`
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "changed", other), http.StatusServiceUnavailable, "needs-attention")
		id := keyID(t, svc, "changed")
		_, err := svc.App.Resolver.Charged(context.Background(), id, *first.StripePaymentIntentID)
		require.ErrorIs(t, err, payments.ErrResolutionRefused, "the 2000 charge is not this request's")
		settled, err := svc.App.Resolver.NotCharged(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, settled.Status)
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "changed", other), http.StatusBadRequest, "payment-rejected")
		require.Len(t, em.PaymentIntents(), 1)
	})

	// A refund key that needs an operator is settled through the same command
	// as a payment's: as refunded by a Stripe Refund that matches it, or as not
	// refunded once Stripe shows none, which gives its amount back.
	t.Run("OperatorResolvesARefundKey", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := paid(t, svc, bundle.apiKey, "pay")
		for _, key := range []string{"parked-1", "parked-2"} {
			svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
			requireProblem(t, postRefund(t, svc, bundle.apiKey, key, p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
		}
		require.Empty(t, svc.Stripe.Refunds())

		// Refunded by hand in the dashboard: the operator names that Refund.
		byHand, err := stripeClient(&testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL}).Refunds.New(
			&stripe.RefundParams{PaymentIntent: p.StripePaymentIntentID, Amount: stripe.Int64(600)})
		require.NoError(t, err)
		_, err = svc.App.Resolve(context.Background(), keyID(t, svc, "parked-1"), "re_doesnotexist")
		require.Error(t, err)
		settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "parked-1"), byHand.ID)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, settled.Status)
		replay := postRefund(t, svc, bundle.apiKey, "parked-1", p.ID, `{"amount": 600}`)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		require.Equal(t, byHand.ID, *decode[refund](t, replay).StripeRefundID)

		settled, err = svc.App.Resolve(context.Background(), keyID(t, svc, "parked-2"), "")
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, settled.Status)
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "parked-2", p.ID, `{"amount": 600}`), http.StatusBadRequest, "refund-rejected")
		rest := postRefund(t, svc, bundle.apiKey, "rest", p.ID, `{}`)
		require.Equal(t, http.StatusCreated, rest.Status, "body: %s", rest.Body)
		require.EqualValues(t, 1400, decode[refund](t, rest).Amount, "the unrefunded 600 was given back")
	})

	// Lock order, refunds. A webhook about a refund locks it
	// (RefundLockForEvent), then the key that made it (ClaimForEvent); keys
	// resolve locked the key, then the refund (recording the outcome). Met,
	// the two deadlocked and Postgres aborted one. Resolve now locks the
	// refund first, as payments' and captures' resolvers lock the payment.
	t.Run("ResolveLocksTheRefundBeforeTheKeyAsAWebhookDoes", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setupWith(t, testutil.ServiceOptions{Workers: quietCompleter})
		p := paid(t, svc, bundle.apiKey, "pay")
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "parked", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
		id := keyID(t, svc, "parked")

		// Nothing at Stripe: resolved as not refunded.
		require.NoError(t, resolveBehindAWebhook(t, svc, id,
			`SELECT 1 FROM refunds WHERE idempotency_key_id = $1 FOR UPDATE`, "%refunds%"))
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "parked", p.ID, `{"amount": 600}`), http.StatusBadRequest, "refund-rejected")
	})

	// Defect (found after 5e2cf9d): "not refunded" had no wait for a create the
	// key's last run may have sent, which Stripe may still be executing.
	t.Run("OperatorNotRefundedWaitsOutACreateStillExecuting", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setupWith(t, testutil.ServiceOptions{
			Stripe: payments.StripeConfig{ExecutionBound: time.Hour}, Workers: quietCompleter,
		})
		p := paid(t, svc, bundle.apiKey, "pay")
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "just-sent", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")

		_, err := svc.App.Resolve(context.Background(), keyID(t, svc, "just-sent"), "")
		require.Error(t, err, "the key's last run sent a refund create a moment ago; Stripe may still be executing it")
	})
}

// TestOperatorResolveOneRefundForTwoKeysIsRefused: two refund keys of one
// payment, 600 each, await an operator. A Refund made in the Dashboard (no
// metadata) of 600 settles the first. Offered for the second too, it is
// refused as a resolution (ErrResolutionRefused, saying refund N records
// it), not failed on refunds_stripe_refund_id_key.
func TestOperatorResolveOneRefundForTwoKeysIsRefused(t *testing.T) {
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
