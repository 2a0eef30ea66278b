package api_test

import (
	"context"
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

// TestOperatorResolveOfARefundWithStripeSlowerThanATransaction: since
// c8b622b, Resolver.Charged reads the Refund it is given inside
// SettleAfter's transaction, whose attempt db.TxTimeout (5 s) bounds; the
// Refunder's own bound is the Stripe timeout (30 s by default). A Stripe
// that answers that read in 6 s, well inside its timeout, now fails every
// resolve of a refund key: the key stays parked, its client answered 503,
// for as long as Stripe is that slow. Before, the read ran before any
// transaction and the resolve went through.
func TestOperatorResolveOfARefundWithStripeSlowerThanATransaction(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	target, err := url.Parse(em.URL)
	require.NoError(t, err)
	var slow atomic.Pointer[string]
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := slow.Load(); id != nil && r.Method == http.MethodGet && r.URL.Path == "/v1/refunds/"+*id {
			time.Sleep(6 * time.Second)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: &testutil.Emulator{Server: em.Server, URL: front.URL},
		WebhookSecret: whsec, Workers: quietCompleter, StripeTimeout: 30 * time.Second, RequestTimeout: 40 * time.Second})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000
	refundRecordedFailed(t, svc, em, apiKey, p)

	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))

	slow.Store(&reB.ID)
	start := time.Now()
	settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "back"), reB.ID)
	took := time.Since(start)
	replay := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.NoError(t, err, "Stripe answered GET /v1/refunds/%s in 6 s (its timeout: 30 s); the resolve failed after %s "+
		"and key \"back\" still answers %d %s", reB.ID, took.Round(time.Millisecond), replay.Status, replay.Body)
	require.Equal(t, http.StatusCreated, settled.Status)
}
