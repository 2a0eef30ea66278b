package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
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
		em     *testutil.Emulator // set by setupBehind: the emulator behind the proxy
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
		require.Empty(t, em.PaymentIntents(), "nothing was charged")
		plantMany(t, em, 10_050)

		// Search covers what is older than its lag: wait that long after the
		// last PaymentIntent was made, however long planting took.
		time.Sleep(lag + 2*time.Second)
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

	// setupBehind starts an emulator, and a service of opts (which take its
	// webhooks, with a completer that stays out of the way) that reaches it
	// through a proxy in the middle: front makes what the service's calls
	// to Stripe meet, from the emulator and the reverse proxy to it.
	setupBehind := func(t *testing.T, opts testutil.ServiceOptions, front func(em *testutil.Emulator, proxy *httputil.ReverseProxy) http.Handler) (*testutil.Service, *testBundle) {
		t.Helper()
		em := testutil.StartEmulator(t, stripefake.Options{})
		target, err := url.Parse(em.URL)
		require.NoError(t, err)
		server := httptest.NewServer(front(em, httputil.NewSingleHostReverseProxy(target)))
		t.Cleanup(server.Close)
		opts.Emulator = &testutil.Emulator{Server: em.Server, URL: server.URL}
		opts.WebhookSecret, opts.Workers = whsec, quietCompleter
		svc, bundle := setupWith(t, opts)
		bundle.em = em
		return svc, bundle
	}

	// ownFailedWhileRead is what ownRefundFailingWhileRead leaves: the service
	// behind a proxy, its user, and payment p (2000), whose refund key "back"
	// (key id) of Refund reA was parked by a second Refund reB; the resolve's
	// error and what re_A's event did meanwhile; the refund's status and Refund
	// recorded after, the key's replay, and what Stripe returns.
	type ownFailedWhileRead struct {
		svc    *testutil.Service
		bundle *testBundle
		p      payment
		secondParked
		resolveErr       error
		meanwhile        string
		status, recorded string
		replay           *testutil.Response
		returning        int64
	}

	// ownRefundFailingWhileRead starts a service behind a proxy that holds a
	// read of a Refund back (heldRead), and refunds 600 of a payment of 2000
	// under key "back" by re_A, which starts first; a second Refund re_B
	// (pending) parks the key for a conflict. The operator resolves it by re_A,
	// as told, and re_A fails while the resolve reads it, its event applied
	// meanwhile. re_B then fails too: nothing was returned to the customer.
	ownRefundFailingWhileRead := func(t *testing.T, first string) ownFailedWhileRead {
		t.Helper()
		var held heldRead
		svc, bundle := setupBehind(t, testutil.ServiceOptions{}, held.front)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000
		got := ownFailedWhileRead{svc: svc, bundle: bundle, p: p,
			secondParked: parkBySecondRefund(t, svc, bundle.em, bundle.apiKey, bundle.userID, p, first, stripefake.RefundPending)}
		require.Equal(t, first, got.first.Status)
		require.Equal(t, "pending", string(got.reB.Status))

		got.resolveErr, got.meanwhile = held.resolveWhileItMoves(t, svc, bundle.em, got.id, got.reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)

		// re_B fails too: nothing was returned to the customer.
		failRefund(t, svc, bundle.em, got.reB.ID, 3*time.Second)

		got.status, got.recorded = refundRecorded(t, svc, p)
		got.replay = postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		got.returning = returnedByStripe(bundle.em)
		return got
	}

	// Since e3ab76b Resolver.Charged reads the Refund it is given before the
	// refund's lock, and relies on failedSince to see a failure applied in
	// between. But an event of the refund's own Refund meeting a key parked for
	// a conflict changes nothing (ClaimForEvent's alarm, or
	// ownFailedBesideSeconds): neither second_refunds nor the refund records
	// the failure. Refund key "back" is pending with re_A; a second Refund re_B
	// (pending) parks it for a conflict; the operator resolves it by re_A, as
	// told. While re_A is read (pending) it fails and its event is applied (an
	// alarm, nothing recorded). The resolve then records the refund pending on
	// re_A, a Refund that failed, and finishes its key. re_B fails too. No
	// event of re_A is to come: the refund is pending for ever, its 600 held,
	// its key answering "pending", though nothing was returned.
	t.Run("ByOwnRefundFailingWhileReadOfAConflictKeyNeverStaysPending", func(t *testing.T) {
		t.Parallel()
		got := ownRefundFailingWhileRead(t, stripefake.RefundPending)
		reA, reB, id, replay, returning, status, recorded := got.reA, got.reB, got.id, got.replay, got.returning, got.status, got.recorded
		require.False(t, got.resolveErr == nil && !parked(replay) && status == "pending" && returning == 0,
			"%s failed while the resolve read it (event applied meanwhile: %s); the resolve by %s succeeded, and with %s "+
				"failed too (Stripe returning %d), refund \"back\" stays %s on %s, no event of it to come, and key %d answers %d %s",
			reA, got.meanwhile, reA, reB.ID, returning, status, recorded, id, replay.Status, replay.Body)
	})

	// As ByOwnRefundFailingWhileReadOfAConflictKeyNeverStaysPending, with
	// re_A succeeded when read, then failed (succeeded to failed) before the
	// lock: the resolve records the refund succeeded on a Refund that failed,
	// and once re_B fails too, the key answers "succeeded" and the payment
	// counts 600 refunded, while Stripe returned nothing. The key is
	// finished: no resolve can reach it, and the customer is never refunded.
	t.Run("ByOwnSucceededRefundFailingWhileReadNeverStaysSucceeded", func(t *testing.T) {
		t.Parallel()
		got := ownRefundFailingWhileRead(t, stripefake.RefundSucceeded)
		reA, reB, id, replay, returning, status, recorded := got.reA, got.reB, got.id, got.replay, got.returning, got.status, got.recorded
		require.False(t, got.resolveErr == nil && !parked(replay) && status == "succeeded" && returning == 0,
			"%s failed while the resolve read it (event applied meanwhile: %s); the resolve by %s succeeded, and with %s "+
				"failed too (Stripe returning %d), refund \"back\" stays %s on %s, the payment counts amount_refunded %v, and key %d answers %d %s",
			reA, got.meanwhile, reA, reB.ID, returning, status, recorded, getPaymentOf(t, got.svc, got.bundle.apiKey, got.p.ID)["amount_refunded"], id, replay.Status, replay.Body)
	})

	// failedSince only looks for a failure recorded since Resolver.Charged
	// read the Refund before the lock (e3ab76b); a Refund that moves forward
	// instead is settled on the stale read. Refund key "back" was recorded
	// failed by re_A; a second Refund re_B (pending) parks it. The operator
	// resolves it by re_B; while re_B is read (pending) it succeeds, and its
	// event is applied (second_refunds records it succeeded). The resolve
	// records the refund pending on re_B and finishes the key: re_B has no
	// event to come, so the refund is pending for ever, the payment never
	// counts the 600 Stripe returned, and the client is told "pending" for
	// good.
	t.Run("BySecondRefundSucceedingWhileReadNeverStaysPending", func(t *testing.T) {
		t.Parallel()
		var held heldRead
		svc, bundle := setupBehind(t, testutil.ServiceOptions{}, held.front)
		p := paid(t, svc, bundle.apiKey, "pay") // 2000
		refundRecordedFailed(t, svc, bundle.em, bundle.apiKey, p)

		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		reB, _ := alarmBySecondRefund(t, svc, bundle.em, bundle.userID, p)
		require.Equal(t, "pending", string(reB.Status))
		id := keyID(t, svc, "back")

		resolveErr, meanwhile := held.resolveWhileItMoves(t, svc, bundle.em, id, reB.ID, stripefake.RefundSucceeded, "")

		var status, recorded, seconds string
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT status, coalesce(stripe_refund_id, ''), coalesce(second_refunds::text, '') FROM refunds WHERE payment_id = $1",
			rowID(t, svc, p.ID)).Scan(&status, &recorded, &seconds))
		replay := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		var stripeStatus string
		for _, rf := range bundle.em.Refunds() {
			if rf.ID == reB.ID {
				stripeStatus = rf.Status
			}
		}
		require.False(t, resolveErr == nil && !parked(replay) && status == "pending" && stripeStatus == stripefake.RefundSucceeded,
			"%s succeeded while the resolve read it pending (event applied meanwhile: %s); the resolve by %s went through, "+
				"and refund \"back\" stays %s on %s (second_refunds %s), no event of it to come, the payment counts "+
				"amount_refunded %v, and key %d answers %d %s",
			reB.ID, meanwhile, reB.ID, status, recorded, seconds, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"],
			id, replay.Status, replay.Body)
	})

	// Since c8b622b, Resolver.Charged reads the Refund it is given inside
	// SettleAfter's transaction, whose attempt db.TxTimeout (5 s) bounds; the
	// Refunder's own bound is the Stripe timeout (30 s by default). A Stripe
	// that answers that read in 6 s, well inside its timeout, now fails every
	// resolve of a refund key: the key stays parked, its client answered 503,
	// for as long as Stripe is that slow. Before, the read ran before any
	// transaction and the resolve went through.
	t.Run("OfARefundWithStripeSlowerThanATransactionGoesThrough", func(t *testing.T) {
		t.Parallel()
		var slow atomic.Pointer[string]
		svc, bundle := setupBehind(t, testutil.ServiceOptions{StripeTimeout: 30 * time.Second, RequestTimeout: 40 * time.Second},
			func(_ *testutil.Emulator, proxy *httputil.ReverseProxy) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if id := slow.Load(); id != nil && r.Method == http.MethodGet && r.URL.Path == "/v1/refunds/"+*id {
						time.Sleep(6 * time.Second)
					}
					proxy.ServeHTTP(w, r)
				})
			})
		p := paid(t, svc, bundle.apiKey, "pay") // 2000
		refundRecordedFailed(t, svc, bundle.em, bundle.apiKey, p)

		reB, _ := alarmBySecondRefund(t, svc, bundle.em, bundle.userID, p)

		slow.Store(&reB.ID)
		start := time.Now()
		settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "back"), reB.ID)
		took := time.Since(start)
		replay := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`)
		require.NoError(t, err, "Stripe answered GET /v1/refunds/%s in 6 s (its timeout: 30 s); the resolve failed after %s "+
			"and key \"back\" still answers %d %s", reB.ID, took.Round(time.Millisecond), replay.Status, replay.Body)
		require.Equal(t, http.StatusCreated, settled.Status)
	})

	// Refund key "back" was recorded failed by its Refund re_A; a second Refund
	// re_B of its intent, pending, hands the key to the operator ("resolve it
	// as refunded by re_B"). The operator does: Resolver.Charged reads re_B
	// (pending) before it locks anything. re_B fails right then, and its
	// refund.updated is applied first: the refund still records re_A, so re_B
	// is "a second Refund, which returned nothing", ignored. The operator's
	// settling then commits the refund pending with re_B, reserving its 600
	// again. re_B has no later event, and nothing else reads it: the refund is
	// pending for ever, the key answers "pending", and 600 of the payment can
	// never be refunded, though nothing was returned. The event is delivered as
	// Stripe answers the resolve's read, and that answer waits until the event
	// is applied or waits for a lock itself: the resolve reads re_B under the
	// refund's row lock, and the event, queued behind it, finds re_B recorded
	// once the resolve commits.
	t.Run("BySecondRefundThatFailsMeanwhileNeverStaysPending", func(t *testing.T) {
		t.Parallel()
		var (
			svc       *testutil.Service
			bundle    *testBundle
			watch     atomic.Pointer[string] // the Refund whose read the operator's resolve makes
			fired     atomic.Bool
			delivered = make(chan *testutil.Response, 1) // its event's delivery
		)
		svc, bundle = setupBehind(t, testutil.ServiceOptions{}, func(em *testutil.Emulator, proxy *httputil.ReverseProxy) http.Handler {
			proxy.ModifyResponse = func(resp *http.Response) error {
				id := watch.Load()
				if id == nil || resp.Request.Method != http.MethodGet || resp.Request.URL.Path != "/v1/refunds/"+*id || !fired.CompareAndSwap(false, true) {
					return nil
				}
				// Answered pending; re_B fails now, and its event comes first:
				// the answer waits until the event is applied, or waits itself
				// for a lock the resolve holds while it reads re_B.
				if _, err := em.SetRefundStatus(*id, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard); err != nil {
					return err
				}
				_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+*id), time.Now().Add(3*time.Second))
				applied := deliverWhileRead(t, svc, payload)
				go func() { delivered <- <-applied }()
				return nil
			}
			return proxy
		})
		p := paid(t, svc, bundle.apiKey, "pay") // 2000
		refundRecordedFailed(t, svc, bundle.em, bundle.apiKey, p)

		require.NoError(t, bundle.em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		reB, _ := alarmBySecondRefund(t, svc, bundle.em, bundle.userID, p)
		require.Equal(t, "pending", string(reB.Status))
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")

		watch.Store(&reB.ID)
		settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "back"), reB.ID)
		require.True(t, fired.Load(), "the resolve read %s", reB.ID)
		// The resolve reads re_B under the refund's row lock: re_B's event
		// waits for it and applies after the commit, to a refund recording
		// re_B, which ends failed.
		require.NoError(t, err)
		select {
		case got := <-delivered:
			require.Equal(t, http.StatusOK, got.Status, "body: %s", got.Body)
		case <-time.After(10 * time.Second):
			t.Fatalf("the event of %s was never applied", reB.ID)
		}
		t.Logf("resolve by %s: %d %s; re_B's failure was recorded %q", reB.ID, settled.Status, settled.Body, lastEventReason(t, svc))

		var status, recorded string
		var reserved, refunded int64
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT r.status, coalesce(r.stripe_refund_id, ''), p.amount_reserved, p.amount_refunded FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.id = $1",
			rowID(t, svc, p.ID)).Scan(&status, &recorded, &reserved, &refunded))
		require.False(t, status == "pending" && recorded == reB.ID,
			"Refund %s failed (returned nothing) and its event was applied before the operator's resolve committed; the refund "+
				"is now %s with %s for good, payment reserving %d (refunded %d): the key answers pending and the 600 can never be refunded",
			reB.ID, status, recorded, reserved, refunded)
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

// heldRead holds back Stripe's answer to one read of a Refund, the GET
// /v1/refunds/<id> of the id stored in on, while during runs.
type heldRead struct {
	on     atomic.Pointer[string]
	during func()
}

// front is the proxy in the middle that holds the read back, for
// setupBehind.
func (h *heldRead) front(_ *testutil.Emulator, proxy *httputil.ReverseProxy) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := h.on.Load()
		if id == nil || r.Method != http.MethodGet || r.URL.Path != "/v1/refunds/"+*id || !h.on.CompareAndSwap(id, nil) {
			proxy.ServeHTTP(w, r)
			return
		}
		// Stripe answers the Refund as it stands; it moves, and its event
		// is applied, before the answer reaches the resolve.
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		h.during()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}

// resolveWhileItMoves has the operator resolve key id by Refund re, which
// moves to status (failure) at Stripe while the resolve reads it, its
// refund.updated delivered meanwhile (deliverWhileRead). It returns the
// resolve's error, and what the event did or why it was not sent.
func (h *heldRead) resolveWhileItMoves(t *testing.T, svc *testutil.Service, em *testutil.Emulator, id int64, re, status, failure string) (resolveErr error, meanwhile string) {
	t.Helper()
	var applied <-chan *testutil.Response
	h.during = func() {
		if _, err := em.SetRefundStatus(re, status, failure); err != nil {
			meanwhile = err.Error()
			return
		}
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+re), time.Now().Add(2*time.Second))
		applied = deliverWhileRead(t, svc, payload)
	}
	h.on.Store(&re)
	_, resolveErr = svc.App.Resolve(context.Background(), id, re)
	if applied != nil {
		meanwhile = appliedAfter(t, svc, applied)
	}
	return resolveErr, meanwhile
}

// refundRecorded is the status and Stripe Refund recorded for the refund
// of payment p.
func refundRecorded(t *testing.T, svc *testutil.Service, p payment) (status, stripeRefundID string) {
	t.Helper()
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT status, coalesce(stripe_refund_id, '') FROM refunds WHERE payment_id = $1", rowID(t, svc, p.ID)).Scan(&status, &stripeRefundID))
	return status, stripeRefundID
}

// deliverWhileRead delivers an event of the Refund the resolve is reading
// at Stripe, while Stripe's answer is held back: the answer goes once the
// event is applied, or once it waits for a lock, which the resolve holds
// when it reads under the refund's row lock (a synchronous delivery would
// then wait for the resolve, and the resolve for the delivery). The
// delivery's answer is on the channel; appliedAfter waits for it.
func deliverWhileRead(t *testing.T, svc *testutil.Service, payload string) <-chan *testutil.Response {
	delivered := make(chan *testutil.Response, 1)
	go func() { delivered <- deliver(t, svc, payload, whsec, time.Now()) }()
	done := make(chan *testutil.Response, 1)
	for {
		select {
		case got := <-delivered:
			done <- got
			return done
		case <-time.After(5 * time.Millisecond):
		}
		var waiting int
		if err := svc.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Errorf("error looking for a delivery waiting on a lock: %v", err)
			return delivered
		}
		if waiting > 0 {
			return delivered
		}
	}
}

// appliedAfter waits for the delivery deliverWhileRead made, requires it
// applied (200: Stripe does not retry it), and words what it did.
func appliedAfter(t *testing.T, svc *testutil.Service, applied <-chan *testutil.Response) string {
	t.Helper()
	select {
	case resp := <-applied:
		require.Equal(t, http.StatusOK, resp.Status, "the event delivered while the resolve read its Refund: %s", resp.Body)
		return fmt.Sprint(resp.Status) + " " + string(resp.Body) + " / " + lastEventReason(t, svc)
	case <-time.After(15 * time.Second):
		t.Fatal("the event delivered while the resolve read its Refund was never applied")
		return ""
	}
}

// parked reports whether a key's replay answers that it awaits an
// operator: its refund's status is not its last word, and a resolve can
// still settle it.
func parked(replay *testutil.Response) bool {
	return replay.Status == http.StatusServiceUnavailable && strings.Contains(string(replay.Body), "needs-attention")
}
