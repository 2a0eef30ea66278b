package stripefake_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// errorOf decodes the error object of a Stripe error answer.
func errorOf(t *testing.T, body string) stripe.Error {
	t.Helper()
	var env struct{ Error stripe.Error }
	require.NoError(t, json.Unmarshal([]byte(body), &env), body)
	return env.Error
}

// piForm is a valid confirmed PaymentIntent create with extra parameters.
func piForm(extra url.Values) url.Values {
	form := url.Values{"amount": {"100"}, "currency": {"usd"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"}}
	for k, v := range extra {
		form[k] = v
	}
	return form
}

// A create with a parameter Stripe does not know is refused as Stripe
// refuses it, before execution: nothing is made, no fault is taken, and
// the idempotency key is not saved, so the corrected request executes.
func TestUnknownParameterRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	auth := "Bearer sk_test_123"
	pi := paid(t, e, "pm_card_visa")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500})

	for _, c := range []struct {
		path  string
		form  url.Values
		param string
	}{
		{"/v1/payment_intents", piForm(url.Values{"foo": {"bar"}}), "foo"},
		{"/v1/payment_intents", piForm(url.Values{"amout": {"100"}}), "amout"},
		{"/v1/payment_intents", piForm(url.Values{"payment_method_type[]": {"card"}}), "payment_method_type"},
		{"/v1/refunds", url.Values{"payment_intent": {pi.ID}, "foo": {"bar"}}, "foo"},
		{"/v1/refunds", url.Values{"payment_intent": {pi.ID}, "refund_reason": {"duplicate"}}, "refund_reason"},
	} {
		hdr := http.Header{"Idempotency-Key": {"unknown-" + c.param + c.path}}
		for range 2 { // the refusal is not saved: the same again is refused again, not replayed
			code, h, body := rawDo(t, e, http.MethodPost, c.path, auth, hdr, c.form)
			require.Equal(t, http.StatusBadRequest, code, body)
			require.Empty(t, h.Get("Idempotent-Replayed"))
			se := errorOf(t, body)
			require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type, body)
			require.Equal(t, stripe.ErrorCodeParameterUnknown, se.Code, body)
			require.Equal(t, c.param, se.Param, body)
			require.Equal(t, "Received unknown parameter: "+c.param, se.Msg, body)
			require.Equal(t, "https://stripe.com/docs/error-codes/parameter-unknown", se.DocURL)
			require.Regexp(t, `^https://dashboard.stripe.com/test/logs/req_`, se.RequestLogURL)
		}
	}
	require.Len(t, e.fake.PaymentIntents(), 1, "nothing created")
	require.Empty(t, e.fake.Refunds(), "nothing refunded")
	require.EqualValues(t, 0, e.fake.Stats().Faults500, "no fault taken")

	// The keys were not saved: corrected, the request executes (and takes
	// the fault still queued).
	hdr := http.Header{"Idempotency-Key": {"unknown-foo/v1/payment_intents"}}
	code, _, body := rawDo(t, e, http.MethodPost, "/v1/payment_intents", auth, hdr, piForm(nil))
	require.Equal(t, http.StatusInternalServerError, code, body)
	code, h, body := rawDo(t, e, http.MethodPost, "/v1/payment_intents", auth, hdr, piForm(nil))
	require.Equal(t, http.StatusInternalServerError, code, body)
	require.Equal(t, "true", h.Get("Idempotent-Replayed"), "the executed 500 is saved")
	hdr = http.Header{"Idempotency-Key": {"unknown-foo/v1/refunds"}}
	code, _, body = rawDo(t, e, http.MethodPost, "/v1/refunds", auth, hdr, url.Values{"payment_intent": {pi.ID}})
	require.Equal(t, http.StatusOK, code, body)
}

// What paymentsd sends, and the other parameters Stripe knows, are
// accepted.
func TestKnownParametersAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	p := piParams("pm_card_visa", "known", "known-1")
	p.PaymentMethodTypes = stripe.StringSlice([]string{"card"})
	p.ErrorOnRequiresAction = stripe.Bool(true)
	p.CaptureMethod = stripe.String("automatic")
	p.ReceiptEmail = stripe.String("a@example.com")
	p.StatementDescriptorSuffix = stripe.String("ORDER")
	p.Shipping = &stripe.ShippingDetailsParams{Name: stripe.String("A"), Address: &stripe.AddressParams{Line1: stripe.String("1 Road")}}
	pi, err := e.sc.PaymentIntents.New(p)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)

	rp := refundOf(pi.ID, 100, "known-2")
	rp.Reason = stripe.String("requested_by_customer")
	rp.AddMetadata("refund_id", "r1")
	rp.AddExpand("charge")
	rp.Currency = stripe.String("usd")
	rp.InstructionsEmail = stripe.String("a@example.com")
	_, err = e.sc.Refunds.New(rp)
	require.NoError(t, err)
}

// A currency Stripe does not support is refused as Stripe refuses it: a 400
// invalid_request_error on param currency, without a code, listing the
// currencies it supports; nothing is made and the key is not saved.
func TestUnsupportedCurrencyRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	auth := "Bearer sk_test_123"
	pi := paid(t, e, "pm_card_visa")
	hdr := http.Header{"Idempotency-Key": {"zzz"}}

	for _, c := range []struct {
		path, given, shown string
		form               url.Values
	}{
		{"/v1/payment_intents", "zzz", "zzz", url.Values{"amount": {"100"}, "currency": {"zzz"}}},
		{"/v1/payment_intents", "ZZZ", "zzz", url.Values{"amount": {"100"}, "currency": {"ZZZ"}}},
		{"/v1/payment_intents", "dollars", "dollars", url.Values{"amount": {"100"}, "currency": {"dollars"}}},
		{"/v1/refunds", "zzz", "zzz", url.Values{"payment_intent": {pi.ID}, "currency": {"zzz"}}},
	} {
		code, h, body := rawDo(t, e, http.MethodPost, c.path, auth, hdr, c.form)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Empty(t, h.Get("Idempotent-Replayed"))
		se := errorOf(t, body)
		require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type, body)
		require.Equal(t, "currency", se.Param, body)
		require.Empty(t, se.Code, "Stripe's answer has no code")
		require.True(t, strings.HasPrefix(se.Msg,
			"Invalid currency: "+c.shown+". Stripe currently supports these currencies: usd, aed, afn,"), se.Msg)
		require.Contains(t, se.Msg, ", eur, ")
	}
	require.Len(t, e.fake.PaymentIntents(), 1)
	require.Empty(t, e.fake.Refunds())

	// Any case of a supported code is accepted and lowercased; the key was
	// not saved by the refusals.
	code, _, body := rawDo(t, e, http.MethodPost, "/v1/payment_intents", auth, hdr,
		url.Values{"amount": {"100"}, "currency": {"EUR"}})
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"currency":"eur"`)
}
