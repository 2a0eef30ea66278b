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

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestOperatorResolveByOwnRefundFailingWhileReadOfConflictKey: since
// e3ab76b Resolver.Charged reads the Refund it is given before the
// refund's lock, and relies on failedSince to see a failure applied in
// between. But an event of the refund's own Refund meeting a key parked
// for a conflict changes nothing (ClaimForEvent's alarm, or
// ownFailedBesideSeconds): neither second_refunds nor the refund records
// the failure. Refund key "back" is pending with re_A; a second Refund
// re_B (pending) parks it for a conflict; the operator resolves it by
// re_A, as told. While re_A is read (pending) it fails and its event is
// applied (an alarm, nothing recorded). The resolve then records the
// refund pending on re_A, a Refund that failed, and finishes its key. re_B
// fails too. No event of re_A is to come: the refund is pending for ever,
// its 600 held, its key answering "pending", though nothing was returned.
func TestOperatorResolveByOwnRefundFailingWhileReadOfConflictKey(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	target, err := url.Parse(em.URL)
	require.NoError(t, err)
	var hookOn atomic.Pointer[string]
	var during func()
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := hookOn.Load()
		if id == nil || r.Method != http.MethodGet || r.URL.Path != "/v1/refunds/"+*id || !hookOn.CompareAndSwap(id, nil) {
			proxy.ServeHTTP(w, r)
			return
		}
		// Stripe answers re_A pending; it fails, and its event is applied,
		// before the answer reaches the resolve.
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		during()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(front.Close)
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: &testutil.Emulator{Server: em.Server, URL: front.URL},
		WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000

	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
	require.Equal(t, "pending", decode[refund](t, created).Status)
	reA := *decode[refund](t, created).StripeRefundID

	// re_B, pending, parks the key for a conflict.
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	require.Equal(t, "pending", string(reB.Status))
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	id := keyID(t, svc, "back")

	var (
		meanwhile string
		applied   <-chan *testutil.Response
	)
	during = func() {
		if _, err := em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard); err != nil {
			meanwhile = err.Error()
			return
		}
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
		applied = deliverWhileRead(t, svc, payload)
	}
	hookOn.Store(&reA)
	_, resolveErr := svc.App.Resolve(context.Background(), id, reA)
	if applied != nil {
		meanwhile = appliedAfter(t, svc, applied)
	}

	// re_B fails too: nothing was returned to the customer.
	_, err = em.SetRefundStatus(reB.ID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(3*time.Second))
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)

	var status, recorded string
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT status, coalesce(stripe_refund_id, '') FROM refunds WHERE payment_id = $1", rowID(t, svc, p.ID)).Scan(&status, &recorded))
	replay := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	var returning int64
	for _, rf := range em.Refunds() {
		if rf.Status != stripefake.RefundFailed {
			returning += rf.Amount
		}
	}
	require.False(t, resolveErr == nil && !parked(replay) && status == "pending" && returning == 0,
		"%s failed while the resolve read it (event applied meanwhile: %s); the resolve by %s succeeded, and with %s "+
			"failed too (Stripe returning %d), refund \"back\" stays %s on %s, no event of it to come, and key %d answers %d %s",
		reA, meanwhile, reA, reB.ID, returning, status, recorded, id, replay.Status, replay.Body)
}

// TestOperatorResolveByOwnSucceededRefundFailingWhileRead: as
// TestOperatorResolveByOwnRefundFailingWhileReadOfConflictKey, with re_A
// succeeded when read, then failed (succeeded to failed) before the lock:
// the resolve records the refund succeeded on a Refund that failed, and
// once re_B fails too, the key answers "succeeded" and the payment counts
// 600 refunded, while Stripe returned nothing. The key is finished: no
// resolve can reach it, and the customer is never refunded.
func TestOperatorResolveByOwnSucceededRefundFailingWhileRead(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	target, err := url.Parse(em.URL)
	require.NoError(t, err)
	var hookOn atomic.Pointer[string]
	var during func()
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := hookOn.Load()
		if id == nil || r.Method != http.MethodGet || r.URL.Path != "/v1/refunds/"+*id || !hookOn.CompareAndSwap(id, nil) {
			proxy.ServeHTTP(w, r)
			return
		}
		// Stripe answers re_A pending; it fails, and its event is applied,
		// before the answer reaches the resolve.
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		during()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(front.Close)
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: &testutil.Emulator{Server: em.Server, URL: front.URL},
		WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000

	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
	require.Equal(t, "succeeded", decode[refund](t, created).Status)
	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	reA := *decode[refund](t, created).StripeRefundID

	// re_B, pending, parks the key for a conflict.
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	require.Equal(t, "pending", string(reB.Status))
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	id := keyID(t, svc, "back")

	var (
		meanwhile string
		applied   <-chan *testutil.Response
	)
	during = func() {
		if _, err := em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard); err != nil {
			meanwhile = err.Error()
			return
		}
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
		applied = deliverWhileRead(t, svc, payload)
	}
	hookOn.Store(&reA)
	_, resolveErr := svc.App.Resolve(context.Background(), id, reA)
	if applied != nil {
		meanwhile = appliedAfter(t, svc, applied)
	}

	// re_B fails too: nothing was returned to the customer.
	_, err = em.SetRefundStatus(reB.ID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(3*time.Second))
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)

	var status, recorded string
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT status, coalesce(stripe_refund_id, '') FROM refunds WHERE payment_id = $1", rowID(t, svc, p.ID)).Scan(&status, &recorded))
	replay := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	var returning int64
	for _, rf := range em.Refunds() {
		if rf.Status != stripefake.RefundFailed {
			returning += rf.Amount
		}
	}
	require.False(t, resolveErr == nil && !parked(replay) && status == "succeeded" && returning == 0,
		"%s failed while the resolve read it (event applied meanwhile: %s); the resolve by %s succeeded, and with %s "+
			"failed too (Stripe returning %d), refund \"back\" stays %s on %s, the payment counts amount_refunded %v, and key %d answers %d %s",
		reA, meanwhile, reA, reB.ID, returning, status, recorded, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"], id, replay.Status, replay.Body)
}

// TestOperatorResolveBySecondRefundSucceedingWhileRead: failedSince only
// looks for a failure recorded since Resolver.Charged read the Refund
// before the lock (e3ab76b); a Refund that moves forward instead is
// settled on the stale read. Refund key "back" was recorded failed by
// re_A; a second Refund re_B (pending) parks it. The operator resolves it
// by re_B; while re_B is read (pending) it succeeds, and its event is
// applied (second_refunds records it succeeded). The resolve records the
// refund pending on re_B and finishes the key: re_B has no event to come,
// so the refund is pending for ever, the payment never counts the 600
// Stripe returned, and the client is told "pending" for good.
func TestOperatorResolveBySecondRefundSucceedingWhileRead(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	target, err := url.Parse(em.URL)
	require.NoError(t, err)
	var hookOn atomic.Pointer[string]
	var during func()
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := hookOn.Load()
		if id == nil || r.Method != http.MethodGet || r.URL.Path != "/v1/refunds/"+*id || !hookOn.CompareAndSwap(id, nil) {
			proxy.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, r)
		during()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(front.Close)
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: &testutil.Emulator{Server: em.Server, URL: front.URL},
		WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000
	refundRecordedFailed(t, svc, em, apiKey, p)

	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	require.Equal(t, "pending", string(reB.Status))
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	id := keyID(t, svc, "back")

	var (
		meanwhile string
		applied   <-chan *testutil.Response
	)
	during = func() {
		if _, err := em.SetRefundStatus(reB.ID, stripefake.RefundSucceeded, ""); err != nil {
			meanwhile = err.Error()
			return
		}
		_, payload := event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(2*time.Second))
		applied = deliverWhileRead(t, svc, payload)
	}
	hookOn.Store(&reB.ID)
	_, resolveErr := svc.App.Resolve(context.Background(), id, reB.ID)
	if applied != nil {
		meanwhile = appliedAfter(t, svc, applied)
	}

	var status, recorded, seconds string
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT status, coalesce(stripe_refund_id, ''), coalesce(second_refunds::text, '') FROM refunds WHERE payment_id = $1",
		rowID(t, svc, p.ID)).Scan(&status, &recorded, &seconds))
	replay := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	var stripeStatus string
	for _, rf := range em.Refunds() {
		if rf.ID == reB.ID {
			stripeStatus = rf.Status
		}
	}
	require.False(t, resolveErr == nil && !parked(replay) && status == "pending" && stripeStatus == stripefake.RefundSucceeded,
		"%s succeeded while the resolve read it pending (event applied meanwhile: %s); the resolve by %s went through, "+
			"and refund \"back\" stays %s on %s (second_refunds %s), no event of it to come, the payment counts "+
			"amount_refunded %v, and key %d answers %d %s",
		reB.ID, meanwhile, reB.ID, status, recorded, seconds, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"],
		id, replay.Status, replay.Body)
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
