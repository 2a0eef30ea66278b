package api_test

import (
	"context"
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
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestWebhookRecordedRefundFailingAfterTheOperatorWeighedASecondOne: refund
// key "back" answered 201 pending with Refund re_A. A second Refund re_B of
// its intent succeeds and parks the key; the operator does what the alarm
// and docs/operations.md say (resolve it as refunded by re_A, the Refund
// the refund records, while re_A stands). re_A then fails. re_B returned
// the customer's 600; the refund records re_A's failure, gives its 600
// back to the payment, and nothing is handed to the operator again (while
// parked, the same failure only alarmed). The payment shows 600 refundable
// that re_B already returned: a client that asks for it under a new key
// refunds the customer 1200 for 600.
func TestWebhookRecordedRefundFailingAfterTheOperatorWeighedASecondOne(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000

	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
	reA := *decode[refund](t, created).StripeRefundID

	// re_B succeeds: the key is the operator's.
	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{}))
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	require.Equal(t, "succeeded", string(reB.Status))
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	resp := deliver(t, svc, payload, whsec, time.Now())
	require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	requireProblem(t, postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")

	// The operator resolves it as refunded by re_A, as told.
	id := keyID(t, svc, "back")
	settled, err := svc.App.Resolve(context.Background(), id, reA)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)

	// re_A fails at Stripe; re_B's 600 stays with the customer.
	_, err = em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
	resp = deliver(t, svc, payload, whsec, time.Now())
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	t.Logf("re_A's failure: %s (%s)", resp.Body, lastEventReason(t, svc))

	got := getPaymentOf(t, svc, apiKey, p.ID)
	var parked bool
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT needs_attention_at IS NOT NULL FROM idempotency_keys WHERE id = $1", id).Scan(&parked))

	// The client asks for the 600 the books say is still refundable.
	again := postRefund(t, svc, apiKey, "again", p.ID, `{"amount": 600}`)
	var returned int64
	for _, rf := range em.Refunds() {
		if rf.Status != stripefake.RefundFailed {
			returned += rf.Amount
		}
	}
	require.True(t, parked || got["amount_refunded"] == float64(600) || again.Status != http.StatusCreated,
		"Refund %s returned 600 for refund key \"back\" (settled by the operator as refunded by %s); %s then failed, "+
			"and the payment shows amount_refunded %v, the key is not handed back, and a new refund of 600 answered %d: "+
			"Stripe returned %d to the customer for one refund of 600",
		reB.ID, reA, reA, got["amount_refunded"], again.Status, returned)
}

// TestWebhookSecondRefundNoNewsReopensAKeyTheOperatorSettled: refund key
// "back" answered 201 pending with Refund re_A; a second Refund re_B of its
// intent succeeded, and its refund.created parked the key ("… records
// Refund re_A (pending for 600) …"). re_A has succeeded at Stripe since,
// its event not yet here. The operator resolves the key as refunded by
// re_A, as told: the resolve reads re_A succeeded and records the refund
// succeeded. Stripe's charge.refund.updated of the same change of re_B
// (no news about re_B, the case TestWebhookSecond/RefundReopensItsKeyOnce
// covers) words the alarm "(succeeded for 600)", because the operator's
// own settling moved the refund. When reopenOnce compared alarms' words
// (up to 93cb3dd) it took that for news and handed the settled key back:
// 503 for nothing new. refunds.second_refunds (00030) records what re_B
// did instead, and the settling stands.
func TestWebhookSecondRefundNoNewsReopensAKeyTheOperatorSettled(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000

	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
	reA := *decode[refund](t, created).StripeRefundID

	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{}))
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	object := stripeObject(t, svc, "/v1/refunds/"+reB.ID)
	_, payload := event("refund.created", object, time.Now().Add(time.Second))
	resp := deliver(t, svc, payload, whsec, time.Now())
	require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	id := keyID(t, svc, "back")

	// re_A succeeds at Stripe; the operator resolves by it.
	_, err := em.SetRefundStatus(reA, stripefake.RefundSucceeded, "")
	require.NoError(t, err)
	settled, err := svc.App.Resolve(context.Background(), id, reA)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
	require.Equal(t, http.StatusCreated, postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`).Status)
	requireMetric(t, svc, "paymentsd_keys_needing_attention 0")

	// The same change of re_B, as charge.refund.updated.
	_, payload = event("charge.refund.updated", object, time.Now().Add(time.Second))
	resp = deliver(t, svc, payload, whsec, time.Now())
	require.Equal(t, http.StatusOK, resp.Status)
	reason := lastEventReason(t, svc)
	replay := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, replay.Status,
		"the operator settled key %d as refunded by %s, weighing %s's 600; charge.refund.updated of the same change of %s "+
			"(no news) handed it back, because the settling itself reworded the alarm (%q): the client's refund answers %d %s",
		id, reA, reB.ID, reB.ID, reason, replay.Status, replay.Body)
}

// metricLine is the value /metrics shows for name, "" when it shows none.
func metricLine(t *testing.T, svc *testutil.Service, name string) string {
	t.Helper()
	resp := svc.Do(t, http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, resp.Status)
	for _, line := range strings.Split(string(resp.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// TestWebhookReopenRetriedCountsTheKeyParkedTwice: a second Refund re_B of
// the intent of a refund recorded failed hands its key back to the
// operator (Engine.Reopen), which counts the key in
// paymentsd_keys_needing_attention_total inside the webhook's
// transaction. Postgres aborts that transaction once with a serialization
// failure (as a concurrent delivery can), and db.WithTxV runs it again:
// counted as it happened (up to 93cb3dd), one key parked once counted
// twice; counted by db.AfterCommit, once. A trigger of the test's own
// database raises the 40001, once.
func TestWebhookReopenRetriedCountsTheKeyParkedTwice(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay")
	refundRecordedFailed(t, svc, em, apiKey, p)
	before := metricLine(t, svc, "paymentsd_keys_needing_attention_total")
	require.Equal(t, "0", before)

	_, err := svc.Pool.Exec(context.Background(), `
CREATE SEQUENCE attack_abort_once;
CREATE FUNCTION attack_abort_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.outcome IS DISTINCT FROM OLD.outcome AND nextval('attack_abort_once') = 1 THEN
        RAISE EXCEPTION 'could not serialize access' USING ERRCODE = '40001';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER attack_abort_once BEFORE UPDATE ON stripe_events FOR EACH ROW EXECUTE FUNCTION attack_abort_once();`)
	require.NoError(t, err)

	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	resp := deliver(t, svc, payload, whsec, time.Now())
	require.Equal(t, http.StatusOK, resp.Status, "body: %s", resp.Body)
	require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
	require.Equal(t, "1", metricLine(t, svc, "paymentsd_keys_needing_attention_total"),
		"one refund key was handed back to the operator once (Refund %s); the counter of keys parked says %s, "+
			"because the retried webhook transaction counted its Reopen again", reB.ID,
		metricLine(t, svc, "paymentsd_keys_needing_attention_total"))
}

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

// TestWebhookRecordedRefundFailingAfterSucceedingHandsTheKeyBack: refund
// key "back" succeeded with Refund re_A (600 counted refunded); a second
// Refund re_B of its intent succeeded too and parked the key, which the
// operator settled as refunded by re_A, as told. re_A then fails at Stripe
// (succeeded to failed). re_B returned the 600: the refund stays
// succeeded, its 600 counted, and the key goes back to the operator, told
// to resolve it by re_B, which settles it; re_A's and re_B's later events
// change nothing.
func TestWebhookRecordedRefundFailingAfterSucceedingHandsTheKeyBack(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000

	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
	reA := *decode[refund](t, created).StripeRefundID
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	id := keyID(t, svc, "back")
	_, err := svc.App.Resolve(context.Background(), id, reA)
	require.NoError(t, err)
	requireMetric(t, svc, "paymentsd_keys_needing_attention 0")

	_, err = em.SetRefundStatus(reA, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+reA), time.Now().Add(2*time.Second))
	resp := deliver(t, svc, payload, whsec, time.Now())
	require.Contains(t, string(resp.Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	require.Contains(t, lastEventReason(t, svc), reB.ID, "the alarm names the second Refund")
	requireProblem(t, postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
	requireMetric(t, svc, "paymentsd_keys_needing_attention 1")
	var status string
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT status FROM refunds WHERE payment_id = $1", rowID(t, svc, p.ID)).Scan(&status))
	require.Equal(t, "succeeded", status, "re_B returned the 600: the refund is not recorded failed")
	require.EqualValues(t, 600, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"])
	var lastError string
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT coalesce(last_error, '') FROM idempotency_keys WHERE id = $1", id).Scan(&lastError))
	require.Contains(t, lastError, "resolve it as refunded by "+reB.ID)

	// The operator settles it by re_B, as told.
	_, err = svc.App.Resolve(context.Background(), id, reA)
	require.ErrorIs(t, err, payments.ErrResolutionRefused, "re_A failed")
	settled, err := svc.App.Resolve(context.Background(), id, reB.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
	replay := decode[refund](t, postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`))
	require.Equal(t, "succeeded", replay.Status)
	require.Equal(t, reB.ID, *replay.StripeRefundID)
	for i, re := range []string{reA, reB.ID} {
		_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+re), time.Now().Add(time.Duration(3+i)*time.Second))
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
	}
	require.Equal(t, http.StatusCreated, postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`).Status)
	require.EqualValues(t, 600, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"])
	requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	rest := postRefund(t, svc, apiKey, "rest", p.ID, `{}`)
	require.EqualValues(t, 1400, decode[refund](t, rest).Amount, "the 600 re_B returned is not refundable again")
}

// TestWebhookRecordedRefundFailingAfterTheSecondFailedToo: refund key
// "back" is pending with Refund re_A; a second Refund re_B, pending, parks
// the key, which the operator settles as refunded by re_A. re_B fails
// (returned nothing), then re_A fails: nothing was returned, and the refund
// is recorded failed without an operator, its 600 refundable again.
func TestWebhookRecordedRefundFailingAfterTheSecondFailedToo(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay") // 2000

	require.NoError(t, em.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	created := postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
	reA := *decode[refund](t, created).StripeRefundID
	reB := secondRefund(t, em, *p.StripePaymentIntentID, 600, intentOf(t, svc, userID, "back").Metadata())
	_, payload := event("refund.created", stripeObject(t, svc, "/v1/refunds/"+reB.ID), time.Now().Add(time.Second))
	require.Contains(t, string(deliver(t, svc, payload, whsec, time.Now()).Body), `"alarm":true`, "recorded as %q", lastEventReason(t, svc))
	_, err := svc.App.Resolve(context.Background(), keyID(t, svc, "back"), reA)
	require.NoError(t, err)

	for i, re := range []string{reB.ID, reA} {
		_, err = em.SetRefundStatus(re, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
		require.NoError(t, err)
		_, payload = event("refund.updated", stripeObject(t, svc, "/v1/refunds/"+re), time.Now().Add(time.Duration(2+i)*time.Second))
		require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
	}
	require.Equal(t, []string{"alarm", "ignored", "applied"}, eventOutcomes(t, svc), "last: %q", lastEventReason(t, svc))
	require.Equal(t, http.StatusCreated, postRefund(t, svc, apiKey, "back", p.ID, `{"amount": 600}`).Status)
	var status string
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT status FROM refunds WHERE payment_id = $1", rowID(t, svc, p.ID)).Scan(&status))
	require.Equal(t, "failed", status)
	requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	require.EqualValues(t, 2000, decode[refund](t, postRefund(t, svc, apiKey, "rest", p.ID, `{}`)).Amount)
}
