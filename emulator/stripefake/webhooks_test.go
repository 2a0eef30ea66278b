package stripefake_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/webhook"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

const hookSecret = "whsec_stripefake_test"

var signaturePattern = regexp.MustCompile(`^t=\d+,v1=[0-9a-f]{64}$`)

// delivery is one POST a receiver got.
type delivery struct {
	event  stripe.Event // zero when the signature did not verify
	body   []byte
	header string
	status int // what the receiver answered
}

// receiver is a webhook endpoint that verifies every delivery with
// stripe-go's webhook package, as paymentsd does, and answers as answer
// says (by the 1-based number of the POST; nil: 200).
type receiver struct {
	srv    *httptest.Server
	answer func(n int) int

	mu   sync.Mutex
	got  []delivery
	gate chan struct{} // when set, every POST waits for it to close
}

func newReceiver(t *testing.T, secret string, answer func(n int) int) *receiver {
	t.Helper()
	r := &receiver{answer: answer}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		gate := r.gate
		r.mu.Unlock()
		if gate != nil {
			<-gate
		}
		body, _ := io.ReadAll(req.Body)
		d := delivery{body: body, header: req.Header.Get("Stripe-Signature"), status: http.StatusOK}
		ev, err := webhook.ConstructEvent(body, d.header, secret)
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			d.status = http.StatusBadRequest
		} else {
			d.event = ev
			if r.answer != nil {
				d.status = r.answer(len(r.got) + 1)
			}
		}
		r.got = append(r.got, d)
		w.WriteHeader(d.status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// deliveries returns what the receiver got so far.
func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// accepted returns the verified events answered 2xx, in arrival order.
func (r *receiver) accepted() []stripe.Event {
	var out []stripe.Event
	for _, d := range r.deliveries() {
		if d.status/100 == 2 {
			out = append(out, d.event)
		}
	}
	return out
}

// hookEnv is an emulator sending its events to url, with quick retries.
func hookEnv(t *testing.T, url string, opts stripefake.Options) *env {
	t.Helper()
	opts.WebhookURL, opts.WebhookSecret = url, hookSecret
	if opts.WebhookBackoff == 0 {
		opts.WebhookBackoff = 20 * time.Millisecond
	}
	if opts.WebhookMaxBackoff == 0 {
		opts.WebhookMaxBackoff = 100 * time.Millisecond
	}
	e := newEnv(t, opts)
	t.Cleanup(e.fake.Close) // runs before newEnv's: cleanups are last-in first-out
	return e
}

// settled waits until no event is pending and returns them all.
func settled(t *testing.T, e *env) []stripefake.Event {
	t.Helper()
	require.Eventually(t, func() bool { return e.fake.Stats().WebhookPending == 0 }, 10*time.Second, 5*time.Millisecond)
	return e.fake.Events()
}

// typesOf lists the types of events, in order.
func typesOf[E stripe.Event | stripefake.Event](events []E) []string {
	out := make([]string, len(events))
	for i, ev := range events {
		switch ev := any(ev).(type) {
		case stripe.Event:
			out[i] = string(ev.Type)
		case stripefake.Event:
			out[i] = ev.Type
		}
	}
	return out
}

// Every state change is an event, signed so that stripe-go verifies it,
// stamped with the server's clock, its object as the API renders it.
func TestWebhookEventsForEveryStateChange(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	clock := newClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{Now: clock.Now})

	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "p1", "key-1"))
	require.NoError(t, err)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclined", "p2", ""))
	require.Equal(t, stripe.ErrorCodeCardDeclined, stripeErr(t, err).Code)
	declined := e.fake.PaymentIntents()[1]

	clock.Add(time.Minute)
	pending := paid(t, e, "pm_card_pendingRefund")
	rf, err := e.sc.Refunds.New(refundOf(pending.ID, 1000, "refund-1"))
	require.NoError(t, err)
	clock.Add(time.Minute)
	_, err = e.fake.SetRefundStatus(rf.ID, stripefake.RefundSucceeded, "")
	require.NoError(t, err)
	_, err = e.fake.SetRefundStatus(rf.ID, stripefake.RefundSucceeded, "") // no change, no event
	require.NoError(t, err)
	failing := paid(t, e, "pm_card_refundFail")
	rf2, err := e.sc.Refunds.New(refundOf(failing.ID, 0, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusSucceeded, rf2.Status, "the answer says succeeded")
	dispute, err := e.fake.OpenDispute(pi.ID, "")
	require.NoError(t, err)

	events := settled(t, e)
	require.Equal(t, []string{
		"payment_intent.created", "payment_intent.succeeded",
		"payment_intent.created", "payment_intent.payment_failed",
		"payment_intent.created", "payment_intent.succeeded",
		"refund.created", "refund.updated",
		"payment_intent.created", "payment_intent.succeeded",
		"refund.created", "refund.updated",
		"charge.dispute.created",
	}, typesOf(events))
	st := e.fake.Stats()
	require.EqualValues(t, 13, st.WebhookEvents)
	require.EqualValues(t, 13, st.WebhookDelivered)
	require.EqualValues(t, 13, st.WebhookAttempts)
	require.Zero(t, st.WebhookRetries)
	require.Len(t, rcv.accepted(), 13)

	byID := map[string]stripe.Event{}
	for _, ev := range rcv.accepted() {
		byID[ev.ID] = ev
	}
	for _, ev := range events {
		require.Equal(t, stripefake.EventDelivered, ev.Status)
		require.Equal(t, 1, ev.Attempts)
		require.Equal(t, 1, ev.Answered)
		require.Regexp(t, `^evt_[A-Za-z0-9]{24}$`, ev.ID)
		got, ok := byID[ev.ID]
		require.True(t, ok, "%s was delivered", ev.ID)
		require.Equal(t, ev.Type, string(got.Type))
		require.Equal(t, ev.Created.Unix(), got.Created)
		require.Equal(t, "event", got.Object)
		require.Equal(t, stripe.APIVersion, got.APIVersion)
		require.False(t, got.Livemode)
	}
	for _, d := range rcv.deliveries() {
		require.Regexp(t, signaturePattern, d.header)
	}

	obj := func(i int, v any) {
		t.Helper()
		var got stripe.Event
		require.NoError(t, json.Unmarshal(events[i].Payload, &got))
		require.NoError(t, json.Unmarshal(got.Data.Raw, v))
	}
	var succeeded stripe.PaymentIntent
	obj(1, &succeeded)
	require.Equal(t, pi.ID, succeeded.ID)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, succeeded.Status)
	require.Equal(t, "p1", succeeded.Metadata["payment_id"])
	require.EqualValues(t, 1234, succeeded.AmountReceived)
	require.Equal(t, pi.LatestCharge.ID, succeeded.LatestCharge.ID)
	require.Equal(t, clock.Now().Add(-2*time.Minute).Unix(), events[1].Created.Unix(), "the time of the change")
	var raw struct {
		Request struct {
			ID             *string `json:"id"`
			IdempotencyKey *string `json:"idempotency_key"`
		} `json:"request"`
		PendingWebhooks int `json:"pending_webhooks"`
	}
	require.NoError(t, json.Unmarshal(events[1].Payload, &raw))
	require.Equal(t, "key-1", *raw.Request.IdempotencyKey)
	require.Regexp(t, `^req_`, *raw.Request.ID)
	require.Equal(t, 1, raw.PendingWebhooks)

	var failed stripe.PaymentIntent
	obj(3, &failed)
	require.Equal(t, declined.ID, failed.ID)
	require.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, failed.Status)
	require.Equal(t, stripe.DeclineCodeGenericDecline, failed.LastPaymentError.DeclineCode)

	var created, updated stripe.Refund
	obj(6, &created)
	obj(7, &updated)
	require.Equal(t, rf.ID, created.ID)
	require.Equal(t, stripe.RefundStatusPending, created.Status)
	require.Equal(t, stripe.RefundStatusSucceeded, updated.Status)
	require.Equal(t, pending.ID, updated.PaymentIntent.ID)
	require.EqualValues(t, 1000, updated.Amount)
	require.Equal(t, events[6].Created.Add(time.Minute), events[7].Created)

	obj(10, &created)
	obj(11, &updated)
	require.Equal(t, rf2.ID, updated.ID)
	require.Equal(t, stripe.RefundStatusSucceeded, created.Status, "refund.created shows what the answer showed")
	require.Equal(t, stripe.RefundStatusFailed, updated.Status)
	require.Equal(t, stripe.RefundFailureReasonExpiredOrCanceledCard, updated.FailureReason)

	var dp stripe.Dispute
	obj(12, &dp)
	require.Equal(t, dispute.ID, dp.ID)
	require.Equal(t, pi.ID, dp.PaymentIntent.ID)
	require.Equal(t, pi.LatestCharge.ID, dp.Charge.ID)
	require.Equal(t, stripe.DisputeReasonFraudulent, dp.Reason)
	require.Equal(t, stripe.DisputeStatusNeedsResponse, dp.Status)
	require.EqualValues(t, 1234, dp.Amount)
}

// A succeeded refund that fails later is a refund.updated too.
func TestWebhookRefundSucceededThenFailed(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.NoError(t, err)
	_, err = e.fake.SetRefundStatus(rf.ID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	events := settled(t, e)
	require.Equal(t, []string{"payment_intent.created", "payment_intent.succeeded", "refund.created", "refund.updated"}, typesOf(events))
	var got stripe.Event
	require.NoError(t, json.Unmarshal(events[3].Payload, &got))
	var updated stripe.Refund
	require.NoError(t, json.Unmarshal(got.Data.Raw, &updated))
	require.Equal(t, stripe.RefundStatusFailed, updated.Status)
	require.Equal(t, stripe.RefundFailureReasonLostOrStolenCard, updated.FailureReason)
	require.Equal(t, rf.ID, events[3].ObjectID)
}

// An endpoint with another secret cannot verify the signature: it answers
// 400, and the emulator keeps retrying; only the right secret verifies.
func TestWebhookSignatureNeedsTheSecret(t *testing.T) {
	t.Parallel()
	wrong := newReceiver(t, "whsec_other", nil)
	e := hookEnv(t, wrong.srv.URL, stripefake.Options{})
	paid(t, e, "pm_card_visa")
	// The receiver records a delivery before it answers: what the emulator
	// has recorded, the receiver has.
	require.Eventually(t, func() bool {
		evs := e.fake.Events()
		return e.fake.Stats().WebhookRetries >= 2 && evs[0].LastError != "" && evs[1].LastError != ""
	}, 10*time.Second, 5*time.Millisecond)
	for _, d := range wrong.deliveries() {
		require.Equal(t, http.StatusBadRequest, d.status)
	}
	events := e.fake.Events()
	require.Equal(t, stripefake.EventPending, events[0].Status)
	require.Contains(t, events[0].LastError, "400")
	require.Positive(t, e.fake.Stats().WebhookRetries)

	// Each attempt is signed afresh, and verifies with the right secret;
	// the body is the event's payload every time.
	for _, d := range wrong.deliveries() {
		require.Regexp(t, signaturePattern, d.header)
		require.NoError(t, webhook.ValidatePayload(d.body, d.header, hookSecret))
		require.Contains(t, []string{string(events[0].Payload), string(events[1].Payload)}, string(d.body))
	}
}

// Unanswered deliveries are retried with backoff until one is answered 2xx;
// several URLs are taken in turn, a dead one among them.
func TestWebhookRetriesUntilAnswered(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, func(n int) int {
		if n <= 3 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{})
	_, err := e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclined", "p", ""))
	require.Error(t, err)
	events := settled(t, e)
	require.Len(t, events, 2)
	attempts := events[0].Attempts + events[1].Attempts
	require.Equal(t, 5, attempts, "three 503s, then one 200 each")
	st := e.fake.Stats()
	require.EqualValues(t, 3, st.WebhookRetries)
	require.EqualValues(t, 3, st.WebhookFailedAttempts)
	require.EqualValues(t, 2, st.WebhookDelivered)
	require.Len(t, rcv.accepted(), 2)

	// A dead endpoint first, a live one second: every event gets there.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	live := newReceiver(t, hookSecret, nil)
	e2 := hookEnv(t, dead.URL+", "+live.srv.URL, stripefake.Options{})
	for range 3 {
		paid(t, e2, "pm_card_visa")
	}
	events = settled(t, e2)
	require.Len(t, events, 6)
	require.Len(t, live.accepted(), 6)
	require.Positive(t, e2.fake.Stats().WebhookRetries)
	for _, ev := range events {
		require.Equal(t, stripefake.EventDelivered, ev.Status)
		require.Equal(t, 1, ev.Answered)
	}
}

// Deliveries never wait on the request's path, and the queue is bounded:
// events past it are dropped and counted. Close stops the retries.
func TestWebhookQueueIsBoundedAndOffTheRequestPath(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	gate := make(chan struct{})
	rcv.mu.Lock()
	rcv.gate = gate
	rcv.mu.Unlock()
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{WebhookQueue: 2})
	start := time.Now()
	paid(t, e, "pm_card_visa") // two events, both waiting on the gate
	paid(t, e, "pm_card_visa") // two more: the queue is full
	require.Less(t, time.Since(start), 2*time.Second)
	st := e.fake.Stats()
	require.EqualValues(t, 4, st.WebhookEvents)
	require.EqualValues(t, 2, st.WebhookDropped)
	require.EqualValues(t, 2, st.WebhookPending)
	statuses := map[string]int{}
	for _, ev := range e.fake.Events() {
		statuses[ev.Status]++
	}
	require.Equal(t, map[string]int{stripefake.EventPending: 2, stripefake.EventDropped: 2}, statuses)
	close(gate)
	settled(t, e)
	require.Len(t, rcv.accepted(), 2)

	// Close returns promptly even while an endpoint keeps failing.
	failing := newReceiver(t, hookSecret, func(int) int { return http.StatusInternalServerError })
	e2 := hookEnv(t, failing.srv.URL, stripefake.Options{})
	paid(t, e2, "pm_card_visa")
	require.Eventually(t, func() bool { return e2.fake.Stats().WebhookRetries > 0 }, 5*time.Second, 5*time.Millisecond)
	closed := time.Now()
	e2.fake.Close()
	require.Less(t, time.Since(closed), time.Second)
	time.Sleep(50 * time.Millisecond) // a POST cut short may still reach the receiver's handler
	n := len(failing.deliveries())
	time.Sleep(200 * time.Millisecond)
	require.Len(t, failing.deliveries(), n, "no attempt after Close")
	require.EqualValues(t, 2, e2.fake.Stats().WebhookPending)
}

// Without a webhook URL no event is made.
func TestWebhookOffWithoutURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	paid(t, e, "pm_card_visa")
	require.Empty(t, e.fake.Events())
	require.Zero(t, e.fake.Stats().WebhookEvents)
	e.fake.Close() // a no-op
}

// Chaos duplicates deliveries: each event is answered twice.
func TestWebhookFaultDuplicate(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{Seed: 7})
	e.fake.SetChaos(stripefake.Chaos{PWebhookDuplicate: 1})
	for range 4 {
		paid(t, e, "pm_card_visa")
	}
	events := settled(t, e)
	// The receiver records a delivery before it answers: once the emulator
	// has every answer, the receiver has every delivery.
	require.Eventually(t, func() bool { return e.fake.Stats().WebhookAnswered == 16 }, 30*time.Second, 5*time.Millisecond)
	seen := map[string]int{}
	for _, ev := range rcv.accepted() {
		seen[ev.ID]++
	}
	for _, ev := range e.fake.Events() {
		require.Equal(t, 2, seen[ev.ID], ev.ID)
		require.Equal(t, 2, ev.Answered)
		require.Equal(t, []string{"duplicate"}, ev.Faults)
	}
	st := e.fake.Stats()
	require.EqualValues(t, 8, st.WebhookDuplicates)
	require.EqualValues(t, 8, st.WebhookDelivered)
	require.EqualValues(t, 16, st.WebhookAnswered)
	require.Len(t, events, 8)
}

// Chaos loses first attempts: the endpoint sees only the retry.
func TestWebhookFaultLost(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{})
	e.fake.SetChaos(stripefake.Chaos{PWebhookLost: 1})
	paid(t, e, "pm_card_visa")
	events := settled(t, e)
	require.Len(t, rcv.deliveries(), 2, "one POST per event: the first attempts never left")
	for _, ev := range events {
		require.Equal(t, 2, ev.Attempts)
		require.Equal(t, 1, ev.Answered)
		require.Equal(t, []string{"lost"}, ev.Faults)
	}
	st := e.fake.Stats()
	require.EqualValues(t, 2, st.WebhookLost)
	require.EqualValues(t, 2, st.WebhookRetries)
	require.EqualValues(t, 2, st.WebhookFailedAttempts)
}

// Chaos reorders: held events arrive after a later one; alone, a held event
// still goes out within the hold bound. Delays make an event late.
func TestWebhookFaultReorderAndDelay(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{})
	e.fake.SetChaos(stripefake.Chaos{PWebhookReorder: 1})
	first := paid(t, e, "pm_card_visa")
	e.fake.SetChaos(stripefake.Chaos{})
	second := paid(t, e, "pm_card_visa")
	settled(t, e)
	var order []string
	for _, ev := range rcv.accepted() {
		var pi stripe.PaymentIntent
		require.NoError(t, json.Unmarshal(ev.Data.Raw, &pi))
		order = append(order, pi.ID)
	}
	require.Len(t, order, 4)
	require.Equal(t, second.ID, order[0], "a later event arrives first")
	require.Greater(t, slices.Index(order, first.ID), 0)
	require.EqualValues(t, 2, e.fake.Stats().WebhookReorders)

	// Held with no later event: released after the hold bound.
	e.fake.SetChaos(stripefake.Chaos{PWebhookReorder: 1})
	held := time.Now()
	_, err := e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclined", "late", ""))
	require.Error(t, err)
	settled(t, e)
	require.GreaterOrEqual(t, time.Since(held), 2*time.Second)

	// A delay of up to 300 ms, drawn per event.
	e.fake.SetChaos(stripefake.Chaos{PWebhookDelay: 1, WebhookDelay: 300 * time.Millisecond})
	paid(t, e, "pm_card_visa")
	events := settled(t, e)
	require.Len(t, events, 8)
	require.Equal(t, []string{"delay"}, events[7].Faults)
	require.EqualValues(t, 2, e.fake.Stats().WebhookDelays)
	require.Len(t, rcv.accepted(), 8)
}

// The admin endpoints: chaos settings of the webhook faults, validated; the
// event listing; disputes.
func TestAdminWebhooksAndDisputes(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{})

	for body, want := range map[string]string{
		`{"chaos":{"p_webhook_delay":0.5}}`:                      "p_webhook_delay needs a positive webhook_delay_ms",
		`{"chaos":{"p_webhook_duplicate":1.5}}`:                  "within [0, 1]",
		`{"chaos":{"p_webhook_reorder":-0.1}}`:                   "within [0, 1]",
		`{"chaos":{"p_webhook_lost":0.2,"webhook_delay_ms":-1}}`: "must not be negative",
	} {
		status, got := postJSON(t, e, "/_fake/faults", body)
		require.Equal(t, http.StatusBadRequest, status, body)
		require.Contains(t, got, want, body)
	}
	// Webhook faults are drawn apart from create faults: they do not count
	// towards the create faults' sum.
	status, got := postJSON(t, e, "/_fake/faults", `{"chaos":{"p_500":1,"p_webhook_delay":1,"webhook_delay_ms":50,"p_webhook_duplicate":1,"p_webhook_reorder":0.5,"p_webhook_lost":0.25}}`)
	require.Equal(t, http.StatusOK, status, got)
	var resp stripefake.AdminFaultsResponse
	require.NoError(t, json.Unmarshal([]byte(got), &resp))
	require.Equal(t, stripefake.AdminChaos{P500: 1, PWebhookDelay: 1, WebhookDelayMS: 50, PWebhookDuplicate: 1, PWebhookReorder: 0.5, PWebhookLost: 0.25}, resp.Chaos)
	status, _ = postJSON(t, e, "/_fake/faults", `{"chaos":{}}`)
	require.Equal(t, http.StatusOK, status)

	pi := paid(t, e, "pm_card_visa")
	_, err := e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclined", "d", ""))
	require.Error(t, err)
	declined := e.fake.PaymentIntents()[1]

	status, got = postJSON(t, e, "/_fake/disputes", `{"payment_intent":"`+pi.ID+`","reason":"product_not_received"}`)
	require.Equal(t, http.StatusOK, status, got)
	var dp stripefake.Dispute
	require.NoError(t, json.Unmarshal([]byte(got), &dp))
	require.Regexp(t, `^dp_[A-Za-z0-9]{24}$`, dp.ID)
	require.Equal(t, "product_not_received", dp.Reason)
	require.Equal(t, pi.ID, dp.PaymentIntent)
	for body, want := range map[string]int{
		`{"payment_intent":"` + pi.ID + `"}`:                          http.StatusBadRequest, // disputed already
		`{"payment_intent":"` + declined.ID + `"}`:                    http.StatusBadRequest, // nothing charged
		`{"payment_intent":"pi_nope"}`:                                http.StatusNotFound,
		`{"payment_intent":"` + pi.ID + `","reason":"bored"}`:         http.StatusBadRequest,
		`{"payment_intent":"` + pi.ID + `","amount":5}`:               http.StatusBadRequest, // unknown field
		`{"payment_intent":"` + declined.ID + `","reason":"fraud"}`:   http.StatusBadRequest,
		`{"payment_intent":"` + declined.ID + `","reason":"general"}`: http.StatusBadRequest,
	} {
		status, got := postJSON(t, e, "/_fake/disputes", body)
		require.Equal(t, want, status, "%s: %s", body, got)
	}
	require.Len(t, e.fake.Disputes(), 1)
	require.EqualValues(t, 1, e.fake.Stats().Disputes)

	settled(t, e)
	code, _, body := rawDo(t, e, http.MethodGet, "/_fake/events", "", nil, nil)
	require.Equal(t, http.StatusOK, code)
	var listed []stripefake.Event
	require.NoError(t, json.Unmarshal([]byte(body), &listed))
	require.Equal(t, []string{"payment_intent.created", "payment_intent.succeeded", "payment_intent.created",
		"payment_intent.payment_failed", "charge.dispute.created"}, typesOf(listed))
	var ev stripe.Event
	require.NoError(t, json.Unmarshal(listed[4].Payload, &ev), "the payload is the event's JSON")
	require.Equal(t, listed[4].ID, ev.ID)
	require.Equal(t, dp.ID, listed[4].ObjectID)
	require.NotNil(t, listed[4].DeliveredAt)

	code, _, body = rawDo(t, e, http.MethodGet, "/_fake/events?type=payment_intent.created&object_id="+pi.ID, "", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal([]byte(body), &listed))
	require.Len(t, listed, 1)
	code, _, body = rawDo(t, e, http.MethodGet, "/_fake/disputes", "", nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, dp.ID)
}

// WebhookLatency holds every event back that long after its change: the
// API's answer goes first, as with Stripe.
func TestWebhookLatency(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{WebhookLatency: time.Second})
	start := time.Now()
	paid(t, e, "pm_card_visa")
	if time.Since(start) < 900*time.Millisecond { // not so slow a machine that the latency is over
		require.Empty(t, rcv.deliveries(), "nothing before the answer")
	}
	settled(t, e)
	require.GreaterOrEqual(t, time.Since(start), time.Second)
	require.Len(t, rcv.accepted(), 2)
}
