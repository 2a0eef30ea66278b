package api_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestWebhooksFromTheEmulator covers POST /webhooks/stripe end to end: the
// emulator sends its own events, under its delivery faults.
func TestWebhooksFromTheEmulator(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		userID int64
	}

	// setupWith starts a service whose emulator sends it its own events
	// (webhookRig), and makes a user of it.
	setupWith := func(t *testing.T, opts testutil.ServiceOptions) (*testutil.Service, *testBundle) {
		t.Helper()
		svc := webhookRig(t, opts)
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, userID: userID}
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		return setupWith(t, testutil.ServiceOptions{})
	}

	// A charge whose answer was lost, whose client never retries, and whose key
	// the completer does not take: the emulator's own payment_intent.succeeded
	// settles it, and a later GET shows it succeeded. Delivered under every
	// webhook fault at once, it still takes effect once.
	t.Run("WebhookFromTheEmulatorSettlesALostAnswer", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setupWith(t, testutil.ServiceOptions{Workers: quietCompleter})
		svc.Stripe.SetChaos(stripefake.Chaos{
			PWebhookDelay: 1, WebhookDelay: 100 * time.Millisecond, PWebhookDuplicate: 1, PWebhookReorder: 1, PWebhookLost: 1,
		})
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "lost", visa), http.StatusServiceUnavailable, "processor-unavailable")
		pis := svc.Stripe.PaymentIntents()
		require.Len(t, pis, 1)
		requests := svc.Stripe.Stats().CreateRequests

		// The client never retries. The key finishes by the event alone.
		testutil.WaitForf(t, 15*time.Second, 10*time.Millisecond, func() bool {
			var point string
			err := svc.Pool.QueryRow(context.Background(), "SELECT recovery_point FROM idempotency_keys WHERE idempotency_key = 'lost'").Scan(&point)
			return err == nil && point == "finished"
		}, "the key did not finish")
		list := decode[struct{ Data []payment }](t, svc.Do(t, http.MethodGet, "/payments", "", "Authorization", "Bearer "+bundle.apiKey))
		require.Len(t, list.Data, 1)
		got := getPaymentOf(t, svc, bundle.apiKey, list.Data[0].ID)
		require.Equal(t, "succeeded", got["status"])
		require.Equal(t, pis[0].ID, got["stripe_payment_intent_id"])
		require.Equal(t, requests, svc.Stripe.Stats().CreateRequests, "no call to create after the lost answer")

		events := allDelivered(t, svc)
		require.Len(t, events, 2)
		for _, ev := range events {
			// Its first attempt lost; the duplicate went with it (then the
			// retry finds the event delivered) or after the retry.
			require.GreaterOrEqual(t, ev.Attempts, 2, ev.Type)
			require.ElementsMatch(t, []string{"delay", "duplicate", "reorder", "lost"}, ev.Faults)
		}
		require.Equal(t, 1, countEvents(t, svc, "WHERE type = 'payment_intent.succeeded' AND outcome = 'applied'"))
		require.Equal(t, 1, countEvents(t, svc, "WHERE type = 'payment_intent.created' AND outcome = 'ignored'"))

		// The retry the client never sent would replay the settled answer.
		resp := svc.PostPayment(t, bundle.apiKey, "lost", visa)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
	})

	// Refunds and disputes through the emulator's events: a pending refund
	// settles when Stripe's network moves it, a failed one gives its amount
	// back, and a dispute marks the payment.
	t.Run("WebhookFromTheEmulatorMovesRefundsAndDisputes", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		p := decode[payment](t, answered(t, func() *testutil.Response { return svc.PostPayment(t, bundle.apiKey, "pay", visa) }))
		require.Equal(t, "succeeded", p.Status)
		require.NoError(t, svc.Stripe.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
		getRefund := func(id string) refund {
			return decode[refund](t, svc.Do(t, http.MethodGet, "/refunds/"+id, "", "Authorization", "Bearer "+bundle.apiKey))
		}

		r1 := decode[refund](t, answered(t, func() *testutil.Response { return postRefund(t, svc, bundle.apiKey, "r1", p.ID, `{"amount": 800}`) }))
		require.Equal(t, "pending", r1.Status)
		r2 := decode[refund](t, answered(t, func() *testutil.Response { return postRefund(t, svc, bundle.apiKey, "r2", p.ID, `{"amount": 300}`) }))
		require.Equal(t, "pending", r2.Status)
		_, err := svc.Stripe.SetRefundStatus(*r1.StripeRefundID, stripefake.RefundSucceeded, "")
		require.NoError(t, err)
		_, err = svc.Stripe.SetRefundStatus(*r2.StripeRefundID, stripefake.RefundFailed, "")
		require.NoError(t, err)
		_, err = svc.Stripe.OpenDispute(*p.StripePaymentIntentID, "")
		require.NoError(t, err)

		allDelivered(t, svc)
		require.Equal(t, "succeeded", getRefund(r1.ID).Status)
		require.Equal(t, "failed", getRefund(r2.ID).Status)
		got := getPaymentOf(t, svc, bundle.apiKey, p.ID)
		require.EqualValues(t, 800, got["amount_refunded"])
		require.Equal(t, true, got["disputed"])
	})
}

// webhookRig is a service with STRIPE_WEBHOOK_SECRET and an emulator that
// sends its events to it, through a forwarder: the emulator is started
// first, and the forwarder answers 503 (the emulator retries) until the
// service is up.
func webhookRig(t *testing.T, opts testutil.ServiceOptions) *testutil.Service {
	t.Helper()
	return webhookRigWith(t, opts, stripefake.Options{})
}

// webhookRigWith is webhookRig with the emulator's options (an
// authorization window, say); its webhook fields are the rig's.
func webhookRigWith(t *testing.T, opts testutil.ServiceOptions, emOpts stripefake.Options) *testutil.Service {
	t.Helper()
	var target atomic.Pointer[httputil.ReverseProxy]
	fwd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := target.Load(); p != nil {
			p.ServeHTTP(w, r)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(fwd.Close)

	emOpts.WebhookURL, emOpts.WebhookSecret = fwd.URL+"/webhooks/stripe", whsec
	emOpts.WebhookLatency, emOpts.WebhookBackoff, emOpts.WebhookMaxBackoff = 100*time.Millisecond, 20*time.Millisecond, 200*time.Millisecond
	em := testutil.StartEmulator(t, emOpts)
	opts.Emulator, opts.WebhookSecret = em, whsec
	svc := testutil.StartService(t, opts)
	u, err := url.Parse(svc.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ErrorLog = log.New(io.Discard, "", 0) // deliveries cut short by the emulator's Close
	target.Store(proxy)
	return svc
}

// answered sends a request again, as a client told to retry later would,
// while it is answered 409: an event may still overtake an answer and
// settle its key first (WebhookLatency makes that rare).
func answered(t *testing.T, send func() *testutil.Response) *testutil.Response {
	t.Helper()
	for range 20 {
		if resp := send(); resp.Status != http.StatusConflict {
			return resp
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("still 409 after 20 tries")
	return nil
}

// allDelivered waits until the emulator has no event left to deliver, and
// checks that every event it delivered is recorded exactly once.
func allDelivered(t *testing.T, svc *testutil.Service) []stripefake.Event {
	t.Helper()
	testutil.WaitForf(t, 15*time.Second, 10*time.Millisecond, func() bool { return svc.Stripe.Stats().WebhookPending == 0 },
		"events still pending: %d", svc.Stripe.Stats().WebhookPending)
	events := svc.Stripe.Events()
	for _, ev := range events {
		require.Equal(t, stripefake.EventDelivered, ev.Status, "%s %s", ev.Type, ev.ID)
		var typ string
		require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT type FROM stripe_events WHERE id = $1", ev.ID).Scan(&typ))
		require.Equal(t, ev.Type, typ)
	}
	require.Equal(t, len(events), countEvents(t, svc, ""), "no other event recorded")
	return events
}
