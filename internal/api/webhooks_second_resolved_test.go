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

// TestOperatorResolveByASecondRefundThatFailsMeanwhileStaysPending: refund
// key "back" was recorded failed by its Refund re_A; a second Refund re_B
// of its intent, pending, hands the key to the operator ("resolve it as
// refunded by re_B"). The operator does: Resolver.Charged reads re_B
// (pending) before it locks anything. re_B fails right then, and its
// refund.updated is applied first: the refund still records re_A, so re_B
// is "a second Refund, which returned nothing", ignored. The operator's
// settling then commits the refund pending with re_B, reserving its 600
// again. re_B has no later event, and nothing else reads it: the refund is
// pending for ever, the key answers "pending", and 600 of the payment can
// never be refunded, though nothing was returned. The event is delivered
// as Stripe answers the resolve's read, and that answer waits until the
// event is applied or waits for a lock itself: the resolve reads re_B
// under the refund's row lock, and the event, queued behind it, finds
// re_B recorded once the resolve commits.
func TestOperatorResolveByASecondRefundThatFailsMeanwhileStaysPending(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	target, err := url.Parse(em.URL)
	require.NoError(t, err)
	var (
		svc       *testutil.Service
		watch     atomic.Pointer[string] // the Refund whose read the operator's resolve makes
		fired     atomic.Bool
		delivered = make(chan *testutil.Response, 1) // its event's delivery
	)
	proxy := httputil.NewSingleHostReverseProxy(target)
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
		go func() { delivered <- deliver(t, svc, payload, whsec, time.Now()) }()
		for {
			select {
			case got := <-delivered:
				delivered <- got
				return nil
			case <-time.After(5 * time.Millisecond):
			}
			var waiting int
			if err := svc.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%FROM refunds%FOR UPDATE%'`).Scan(&waiting); err != nil {
				return err
			}
			if waiting > 0 {
				return nil
			}
		}
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	svc = testutil.StartService(t, testutil.ServiceOptions{Emulator: &testutil.Emulator{Server: em.Server, URL: front.URL},
		WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000
	refundRecordedFailed(t, svc, em, apiKey, p)

	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	require.Equal(t, "pending", string(reB.Status))
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	resp := deliver(t, svc, payload, whsec, time.Now())
	require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	requireProblem(t, postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")

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
}
