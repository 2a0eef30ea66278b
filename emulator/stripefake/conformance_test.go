package stripefake_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// Every answer the emulator gives, through stripe-go and raw, and every
// event it sends conforms to Stripe's OpenAPI spec, nested objects (an
// expanded latest_charge, last_payment_error's payment_method, the
// PaymentIntent in a decline's or a refused capture's error) included,
// PaymentIntents in every status (requires_capture and canceled included):
// required fields present, types and enums right, null only where the spec
// allows it.
func TestConformsToStripeSpec(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e, rec := recordedEnv(t, rcv.srv.URL)
	expandCharge := func(p *stripe.PaymentIntentParams) *stripe.PaymentIntentParams {
		p.AddExpand("latest_charge")
		return p
	}

	// PaymentIntents in every status the emulator makes.
	visa := paid(t, e, "pm_card_visa")
	p := piParams("pm_card_visa", "plain", "")
	p.Expand = nil
	_, err := e.sc.PaymentIntents.New(p)
	require.NoError(t, err)
	p = piParams("pm_card_visa", "unconfirmed", "")
	p.Confirm = nil
	_, err = e.sc.PaymentIntents.New(p)
	require.NoError(t, err)
	p.PaymentMethod = nil
	_, err = e.sc.PaymentIntents.New(p)
	require.NoError(t, err)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclinedInsufficientFunds", "declined", "declined-key"))
	require.Error(t, err)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclinedInsufficientFunds", "declined", "declined-key"))
	require.Error(t, err, "the replayed decline")
	settling := processing(t, e, "processing")
	failing := processing(t, e, "failing")
	_, err = e.fake.SetPaymentIntentStatus(settling.ID, stripefake.StatusSucceeded, "")
	require.NoError(t, err)
	_, err = e.fake.SetPaymentIntentStatus(failing.ID, stripefake.StatusRequiresPaymentMethod, "lost_card")
	require.NoError(t, err)
	processing(t, e, "still")

	// Manual capture: authorized and left so, captured (all of it with the
	// charge expanded, part of it), canceled by a request and by the end of
	// the authorization window; the refusals.
	held := authorized(t, e, "held")
	full := authorized(t, e, "full")
	cp := captureOf(0, "")
	cp.AddExpand("latest_charge")
	_, err = e.sc.PaymentIntents.Capture(full.ID, cp)
	require.NoError(t, err)
	part := authorized(t, e, "part")
	_, err = e.sc.PaymentIntents.Capture(part.ID, captureOf(1000, ""))
	require.NoError(t, err)
	_, err = e.sc.Refunds.New(refundOf(part.ID, 0, ""))
	require.NoError(t, err)
	canceled := authorized(t, e, "canceled")
	kp := cancelOf("requested_by_customer", "")
	kp.AddExpand("latest_charge")
	_, err = e.sc.PaymentIntents.Cancel(canceled.ID, kp)
	require.NoError(t, err)
	expired := authorized(t, e, "expired")
	got, err := e.fake.Backdate(expired.ID, 8*24*time.Hour)
	require.NoError(t, err)
	require.Equal(t, stripefake.StatusCanceled, got.Status)
	_, err = e.sc.PaymentIntents.Capture(full.ID, nil)
	require.Error(t, err)
	_, err = e.sc.PaymentIntents.Cancel(full.ID, nil)
	require.Error(t, err)
	_, err = e.sc.PaymentIntents.Capture(expired.ID, nil)
	require.Error(t, err)
	_, err = e.sc.PaymentIntents.Capture(held.ID, captureOf(99999, ""))
	require.Error(t, err)
	_, err = e.sc.PaymentIntents.Capture("pi_nope", nil)
	require.Error(t, err)
	_, err = e.sc.PaymentIntents.Cancel("pi_nope", nil)
	require.Error(t, err)
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged, Op: stripefake.OpCapturePaymentIntent})
	_, err = e.sc.PaymentIntents.Capture(authorized(t, e, "charged").ID, nil)
	require.Error(t, err)

	for _, pi := range e.fake.PaymentIntents() {
		_, err = e.sc.PaymentIntents.Get(pi.ID, nil)
		require.NoError(t, err)
		_, err = e.sc.PaymentIntents.Get(pi.ID, expandCharge(&stripe.PaymentIntentParams{}))
		require.NoError(t, err)
	}

	lp := &stripe.PaymentIntentListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(3)}}
	lp.AddExpand("data.latest_charge")
	it := e.sc.PaymentIntents.List(lp)
	for it.Next() {
	}
	require.NoError(t, it.Err())
	sp := &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: "currency:'usd'", Limit: stripe.Int64(3)}}
	sp.AddExpand("data.latest_charge")
	sit := e.sc.PaymentIntents.Search(sp)
	for sit.Next() {
	}
	require.NoError(t, sit.Err())

	// Refunds: succeeded, pending then succeeded, failed, with a reason.
	rp := refundOf(visa.ID, 100, "")
	rp.Reason = stripe.String("requested_by_customer")
	rp.AddMetadata("refund_id", "1")
	_, err = e.sc.Refunds.New(rp)
	require.NoError(t, err)
	pending := paid(t, e, "pm_card_pendingRefund")
	rf, err := e.sc.Refunds.New(refundOf(pending.ID, 0, ""))
	require.NoError(t, err)
	_, err = e.sc.Refunds.Get(rf.ID, nil)
	require.NoError(t, err)
	_, err = e.fake.SetRefundStatus(rf.ID, stripefake.RefundSucceeded, "")
	require.NoError(t, err)
	refundFail := paid(t, e, "pm_card_refundFail")
	failed, err := e.sc.Refunds.New(refundOf(refundFail.ID, 0, ""))
	require.NoError(t, err)
	_, err = e.sc.Refunds.Get(failed.ID, nil)
	require.NoError(t, err)
	rit := e.sc.Refunds.List(&stripe.RefundListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(2)}})
	for rit.Next() {
	}
	require.NoError(t, rit.Err())

	// Refusals through stripe-go.
	_, err = e.sc.Refunds.New(refundOf(visa.ID, 100000, ""))
	require.Error(t, err)
	_, err = e.sc.Refunds.New(refundOf("pi_nope", 0, ""))
	require.Error(t, err)
	_, err = e.sc.PaymentIntents.Get("pi_nope", nil)
	require.Error(t, err)
	_, err = e.sc.Refunds.Get("re_nope", nil)
	require.Error(t, err)
	_, err = e.sc.PaymentIntents.New(piParams("pm_nope", "x", ""))
	require.Error(t, err)
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500})
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "x", ""))
	require.Error(t, err)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "x", "declined-key"))
	require.Error(t, err, "an idempotency key reused with other parameters")

	// Refusals only a raw request makes.
	auth := "Bearer sk_test_123"
	raw := func(method, path, auth string, form url.Values) {
		code, _, body := rawDo(t, e, method, path, auth, nil, form)
		require.GreaterOrEqual(t, code, 400, body)
		u, err := url.Parse(path)
		require.NoError(t, err)
		rec.add(answer{method: method, path: u.Path, status: code, body: []byte(body)})
	}
	raw(http.MethodPost, "/v1/payment_intents", auth, piForm(url.Values{"foo": {"bar"}}))
	raw(http.MethodPost, "/v1/payment_intents", auth, url.Values{"amount": {"100"}, "currency": {"zzz"}})
	raw(http.MethodPost, "/v1/payment_intents", auth, url.Values{"currency": {"usd"}})
	raw(http.MethodPost, "/v1/refunds", auth, url.Values{"payment_intent": {visa.ID}, "reason": {"because"}})
	raw(http.MethodGet, "/v1/payment_intents?foo=1", auth, nil)
	raw(http.MethodGet, "/v1/payment_intents?limit=0", auth, nil)
	raw(http.MethodGet, "/v1/payment_intents/search?query=nonsense", auth, nil)
	raw(http.MethodGet, "/v1/refunds?starting_after=re_nope", auth, nil)
	raw(http.MethodGet, "/v1/payment_intents/"+visa.ID, "", nil)
	raw(http.MethodGet, "/v1/charges", auth, nil)
	raw(http.MethodPost, "/v1/payment_intents/"+held.ID+"/capture", auth, url.Values{"foo": {"bar"}})
	raw(http.MethodPost, "/v1/payment_intents/"+held.ID+"/capture", auth, url.Values{"amount_to_capture": {"0"}})
	raw(http.MethodPost, "/v1/payment_intents/"+held.ID+"/cancel", auth, url.Values{"cancellation_reason": {"automatic"}})

	// A dispute; the charge now says it is disputed.
	require.False(t, charge(t, e, visa.ID).Disputed)
	_, err = e.fake.OpenDispute(visa.ID, "product_not_received")
	require.NoError(t, err)
	require.True(t, charge(t, e, visa.ID).Disputed)
	// The chargeback took the money back: a refund is charge_disputed.
	raw(http.MethodPost, "/v1/refunds", auth, url.Values{"payment_intent": {visa.ID}})

	answers := rec.answers()
	require.Greater(t, len(answers), 40)
	statuses := map[int]bool{}
	for _, a := range answers {
		statuses[a.status] = true
		t.Run(a.String(), func(t *testing.T) {
			requireConforms(t, a.method, a.path, a.status, a.body)
		})
	}
	for _, s := range []int{200, 400, 401, 402, 404, 500} {
		require.True(t, statuses[s], "an answer with status %d was checked", s)
	}

	// Every event, and the object in it.
	events := settled(t, e)
	types := map[string]bool{}
	for _, ev := range events {
		types[ev.Type] = true
		t.Run(ev.Type+" "+ev.ID, func(t *testing.T) {
			requireConformsTo(t, "event", ev.Payload)
			var env struct {
				Data struct {
					Object json.RawMessage `json:"object"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(ev.Payload, &env))
			var obj struct {
				Object string `json:"object"`
			}
			require.NoError(t, json.Unmarshal(env.Data.Object, &obj))
			requireConformsTo(t, obj.Object, env.Data.Object)
		})
	}
	for _, typ := range []string{
		"payment_intent.created", "payment_intent.succeeded", "payment_intent.payment_failed",
		"payment_intent.processing", "payment_intent.amount_capturable_updated", "payment_intent.canceled",
		"refund.created", "refund.updated", "charge.dispute.created",
	} {
		require.True(t, types[typ], "a %s event was checked", typ)
	}
}

// The check above can fail: a real answer altered in each way the spec
// forbids (a missing nested field, a wrong type, a value outside an enum, a
// null where none is allowed) is caught.
func TestSpecCheckCatchesViolations(t *testing.T) {
	t.Parallel()
	e, rec := recordedEnv(t, "")
	_, err := e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclined", "bad", ""))
	require.Error(t, err)
	answers := rec.answers()
	require.Len(t, answers, 1)
	a := answers[0]
	requireConforms(t, a.method, a.path, a.status, a.body)

	for name, change := range map[string]func(m map[string]any){
		"nested field missing": func(m map[string]any) {
			delete(m["error"].(map[string]any)["payment_method"].(map[string]any), "billing_details")
		},
		"deeper nested field missing": func(m map[string]any) {
			pi := m["error"].(map[string]any)["payment_intent"].(map[string]any)
			delete(pi["last_payment_error"].(map[string]any)["payment_method"].(map[string]any), "created")
		},
		"wrong type": func(m map[string]any) {
			m["error"].(map[string]any)["payment_intent"].(map[string]any)["created"] = "yesterday"
		},
		"outside the enum": func(m map[string]any) {
			m["error"].(map[string]any)["payment_intent"].(map[string]any)["status"] = "paid"
		},
		"null not allowed": func(m map[string]any) {
			m["error"].(map[string]any)["payment_intent"].(map[string]any)["amount"] = nil
		},
		"error type outside the enum": func(m map[string]any) {
			m["error"].(map[string]any)["type"] = "decline"
		},
	} {
		var m map[string]any
		require.NoError(t, json.Unmarshal(a.body, &m))
		change(m)
		bad, err := json.Marshal(m)
		require.NoError(t, err)
		schema, where := responseSchema(t, a.method, a.path, a.status)
		require.Error(t, conforms(schema, where, bad), name)
	}
}

// Every parameter the spec documents for the endpoints the emulator
// implements is known to it: none is refused as parameter_unknown (it may
// be refused for its value).
func TestKnownParametersCoverSpec(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	doc := spec(t)
	pi := paid(t, e, "pm_card_visa")
	auth := "Bearer sk_test_123"

	bodyParams := func(path string) []string {
		op := doc.Paths.Find(path).Post
		schema := op.RequestBody.Value.Content.Get("application/x-www-form-urlencoded").Schema.Value
		return slices.Sorted(maps.Keys(schema.Properties))
	}
	queryParams := func(path string) []string {
		var names []string
		for _, p := range doc.Paths.Find(path).Get.Parameters {
			if p.Value.In == "query" {
				names = append(names, p.Value.Name)
			}
		}
		return names
	}
	check := func(method, path string, base url.Values, names []string) {
		t.Helper()
		require.NotEmpty(t, names)
		for _, name := range names {
			form := url.Values{}
			for k, v := range base {
				form[k] = v
			}
			if _, ok := form[name]; !ok {
				form[name] = []string{"1"}
			}
			target, body := path, form
			if method == http.MethodGet {
				target, body = path+"?"+form.Encode(), nil
			}
			_, _, answer := rawDo(t, e, method, target, auth, nil, body)
			require.NotContains(t, answer, `"parameter_unknown"`, "%s %s with %s", method, path, name)
		}
	}
	check(http.MethodPost, "/v1/payment_intents", piForm(nil), bodyParams("/v1/payment_intents"))
	check(http.MethodPost, "/v1/refunds", url.Values{"payment_intent": {pi.ID}, "amount": {"1"}}, bodyParams("/v1/refunds"))
	check(http.MethodGet, "/v1/payment_intents", nil, queryParams("/v1/payment_intents"))
	check(http.MethodGet, "/v1/refunds", nil, queryParams("/v1/refunds"))
	check(http.MethodPost, "/v1/payment_intents/"+authorized(t, e, "c").ID+"/capture", nil,
		bodyParams("/v1/payment_intents/{intent}/capture"))
	check(http.MethodPost, "/v1/payment_intents/"+authorized(t, e, "k").ID+"/cancel", nil,
		bodyParams("/v1/payment_intents/{intent}/cancel"))
}
