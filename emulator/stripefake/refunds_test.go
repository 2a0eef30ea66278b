package stripefake_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

var refundIDPattern = regexp.MustCompile(`^re_[A-Za-z0-9]{24}$`)

// paid creates a succeeded PaymentIntent of 1234 usd paid with pm.
func paid(t *testing.T, e *env, pm string) *stripe.PaymentIntent {
	t.Helper()
	pi, err := e.sc.PaymentIntents.New(piParams(pm, "paid", ""))
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)
	return pi
}

// refundOf builds refund params for the PaymentIntent; amount 0 leaves the
// amount out (refund all that remains), key "" sends no Idempotency-Key.
func refundOf(piID string, amount int64, key string) *stripe.RefundParams {
	p := &stripe.RefundParams{PaymentIntent: stripe.String(piID)}
	if amount > 0 {
		p.Amount = stripe.Int64(amount)
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// charge retrieves the PaymentIntent's latest charge, expanded.
func charge(t *testing.T, e *env, piID string) *stripe.Charge {
	t.Helper()
	p := &stripe.PaymentIntentParams{}
	p.AddExpand("latest_charge")
	pi, err := e.sc.PaymentIntents.Get(piID, p)
	require.NoError(t, err)
	require.NotNil(t, pi.LatestCharge)
	return pi.LatestCharge
}

func TestRefundFull(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")

	p := refundOf(pi.ID, 0, "full")
	p.Reason = stripe.String(string(stripe.RefundReasonRequestedByCustomer))
	p.AddMetadata("refund_id", "r1")
	rf, err := e.sc.Refunds.New(p)
	require.NoError(t, err)
	require.Regexp(t, refundIDPattern, rf.ID)
	require.Equal(t, "refund", rf.Object)
	require.EqualValues(t, 1234, rf.Amount)
	require.Equal(t, stripe.RefundStatusSucceeded, rf.Status)
	require.Equal(t, stripe.RefundReasonRequestedByCustomer, rf.Reason)
	require.Equal(t, "r1", rf.Metadata["refund_id"])
	require.Equal(t, pi.ID, rf.PaymentIntent.ID)
	require.Equal(t, pi.LatestCharge.ID, rf.Charge.ID)
	require.Equal(t, stripe.CurrencyUSD, rf.Currency)
	require.Empty(t, rf.FailureReason)
	require.Regexp(t, `^txn_`, rf.BalanceTransaction.ID)
	require.InDelta(t, time.Now().Unix(), rf.Created, 5)
	require.Regexp(t, `^req_`, rf.LastResponse.RequestID)

	ch := charge(t, e, pi.ID)
	require.Equal(t, pi.LatestCharge.ID, ch.ID)
	require.EqualValues(t, 1234, ch.AmountRefunded)
	require.True(t, ch.Refunded)
	require.True(t, ch.Paid)
	require.Equal(t, stripe.ChargeStatusSucceeded, ch.Status)

	rfs := e.fake.Refunds()
	require.Len(t, rfs, 1)
	require.Equal(t, stripefake.Refund{
		ID: rf.ID, PaymentIntent: pi.ID, Charge: pi.LatestCharge.ID, Amount: 1234, Currency: "usd",
		Status: stripefake.RefundSucceeded, Reason: stripefake.RefundReasonRequestedByCustomer,
		Metadata: map[string]string{"refund_id": "r1"}, Created: time.Unix(rf.Created, 0).UTC(), IdempotencyKey: "full",
	}, rfs[0])
	require.EqualValues(t, 1234, e.fake.PaymentIntents()[0].AmountRefunded)

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.RefundCreateRequests)
	require.EqualValues(t, 1, st.RefundsCreated)
	require.EqualValues(t, 1, st.CreateRequests) // the PaymentIntent's
}

func TestRefundPartialsThenAlreadyRefunded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_mastercard")

	first, err := e.sc.Refunds.New(refundOf(pi.ID, 500, ""))
	require.NoError(t, err)
	require.EqualValues(t, 500, first.Amount)
	ch := charge(t, e, pi.ID)
	require.EqualValues(t, 500, ch.AmountRefunded)
	require.False(t, ch.Refunded)

	// No amount: all that remains.
	rest, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.NoError(t, err)
	require.EqualValues(t, 734, rest.Amount)
	require.True(t, charge(t, e, pi.ID).Refunded)

	for _, amount := range []int64{0, 1} {
		_, err = e.sc.Refunds.New(refundOf(pi.ID, amount, ""))
		se := stripeErr(t, err)
		require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
		require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
		require.Equal(t, stripe.ErrorCodeChargeAlreadyRefunded, se.Code)
		require.Equal(t, "Charge "+pi.LatestCharge.ID+" has already been refunded.", se.Msg)
		var ire *stripe.InvalidRequestError
		require.ErrorAs(t, err, &ire)
	}
	require.Len(t, e.fake.Refunds(), 2)
	st := e.fake.Stats()
	require.EqualValues(t, 2, st.RefundsCreated)
	require.EqualValues(t, 2, st.RefundsRefused)
	require.EqualValues(t, 2, st.InvalidRequests)
}

// Stripe's message names the charge amount until something was refunded,
// then the unrefunded amount, both formatted in the currency.
func TestRefundOverRefund(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")

	_, err := e.sc.Refunds.New(refundOf(pi.ID, 2000, "over"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeAmountTooLarge, se.Code)
	require.Equal(t, "amount", se.Param)
	require.Equal(t, "Refund amount ($20.00) is greater than charge amount ($12.34)", se.Msg)

	// Executed, so saved: the key replays the refusal.
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 2000, "over"))
	replay := stripeErr(t, err)
	require.Equal(t, "true", replay.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, se.Msg, replay.Msg)

	_, err = e.sc.Refunds.New(refundOf(pi.ID, 1000, ""))
	require.NoError(t, err)
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 235, ""))
	se = stripeErr(t, err)
	require.Equal(t, stripe.ErrorCodeAmountTooLarge, se.Code)
	require.Equal(t, "Refund amount ($2.35) is greater than unrefunded amount on charge ($2.34)", se.Msg)
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 234, ""))
	require.NoError(t, err)

	// Other currencies: zero-decimal, and without a known symbol.
	for currency, want := range map[string]string{
		"jpy": "Refund amount (¥1235) is greater than charge amount (¥1234)",
		"chf": "Refund amount (12.35 CHF) is greater than charge amount (12.34 CHF)",
	} {
		p := piParams("pm_card_visa", currency, "")
		p.Currency = stripe.String(currency)
		other, err := e.sc.PaymentIntents.New(p)
		require.NoError(t, err)
		_, err = e.sc.Refunds.New(refundOf(other.ID, 1235, ""))
		require.Equal(t, want, stripeErr(t, err).Msg)
	}
	require.EqualValues(t, 4, e.fake.Stats().RefundsRefused)
}

func TestRefundOfIntentWithoutSuccessfulCharge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclined", "1", ""))
	declined := stripeErr(t, err).PaymentIntent
	require.NotNil(t, declined)
	unconfirmed := piParams("pm_card_visa", "2", "")
	unconfirmed.Confirm = nil
	pending, err := e.sc.PaymentIntents.New(unconfirmed)
	require.NoError(t, err)

	for _, id := range []string{declined.ID, pending.ID} {
		_, err = e.sc.Refunds.New(refundOf(id, 0, ""))
		se := stripeErr(t, err)
		require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
		require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
		require.Equal(t, stripe.ErrorCodeChargeNotRefundable, se.Code)
		require.Equal(t, "payment_intent", se.Param)
		require.Equal(t, "This PaymentIntent ("+id+") does not have a successful charge to refund.", se.Msg)
	}
	// The declined charge, named directly, is refused the same way.
	_, err = e.sc.Refunds.New(&stripe.RefundParams{Charge: stripe.String(declined.LastPaymentError.ChargeID)})
	require.Equal(t, "This PaymentIntent ("+declined.ID+") does not have a successful charge to refund.", stripeErr(t, err).Msg)
	require.Empty(t, e.fake.Refunds())
	require.EqualValues(t, 3, e.fake.Stats().RefundsRefused)
}

func TestRefundUnknownIntentOrCharge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	other := paid(t, e, "pm_card_visa")

	for _, c := range []struct {
		params      *stripe.RefundParams
		param, code string
		msg         string
	}{
		{refundOf("pi_nope", 0, ""), "payment_intent", string(stripe.ErrorCodeResourceMissing), "No such payment_intent: 'pi_nope'"},
		{&stripe.RefundParams{Charge: stripe.String("ch_nope")}, "charge", string(stripe.ErrorCodeResourceMissing), "No such charge: 'ch_nope'"},
		{&stripe.RefundParams{Charge: stripe.String(other.LatestCharge.ID), PaymentIntent: stripe.String(pi.ID)}, "charge", "",
			"Charge " + other.LatestCharge.ID + " does not belong to PaymentIntent " + pi.ID + "."},
	} {
		_, err := e.sc.Refunds.New(c.params)
		se := stripeErr(t, err)
		require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode, c.msg)
		require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
		require.EqualValues(t, c.code, se.Code)
		require.Equal(t, c.param, se.Param)
		require.Equal(t, c.msg, se.Msg)
	}

	// Refunding by charge, with or without its PaymentIntent.
	rf, err := e.sc.Refunds.New(&stripe.RefundParams{Charge: stripe.String(pi.LatestCharge.ID), Amount: stripe.Int64(34)})
	require.NoError(t, err)
	require.Equal(t, pi.ID, rf.PaymentIntent.ID)
	rf, err = e.sc.Refunds.New(&stripe.RefundParams{Charge: stripe.String(pi.LatestCharge.ID), PaymentIntent: stripe.String(pi.ID)})
	require.NoError(t, err)
	require.EqualValues(t, 1200, rf.Amount)
}

func TestRefundValidationErrorsAreNotSaved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	auth := "Bearer sk_test_123"
	hdr := http.Header{"Idempotency-Key": {"refund-validation"}}

	for _, c := range []struct {
		form        url.Values
		param, code string
		msg         string
	}{
		{url.Values{"amount": {"100"}}, "payment_intent", "parameter_missing", "Missing required param: payment_intent."},
		{url.Values{"payment_intent": {pi.ID}, "amount": {"0"}}, "amount", "parameter_invalid_integer", "Invalid positive integer"},
		{url.Values{"payment_intent": {pi.ID}, "amount": {"-5"}}, "amount", "parameter_invalid_integer", "Invalid positive integer"},
		{url.Values{"payment_intent": {pi.ID}, "amount": {"1.5"}}, "amount", "parameter_invalid_integer", "Invalid integer: 1.5"},
		{url.Values{"payment_intent": {pi.ID}, "reason": {"because"}}, "reason", "",
			"Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer"},
		{url.Values{"payment_intent": {pi.ID}, "metadata[a[b]]": {"x"}}, "metadata[a[b]]", "", "Invalid metadata key: metadata[a[b]]."},
	} {
		code, h, body := rawDo(t, e, http.MethodPost, "/v1/refunds", auth, hdr, c.form)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Empty(t, h.Get("Idempotent-Replayed"))
		var env struct{ Error stripe.Error }
		require.NoError(t, json.Unmarshal([]byte(body), &env))
		require.Equal(t, stripe.ErrorTypeInvalidRequest, env.Error.Type, body)
		require.Equal(t, c.param, env.Error.Param, body)
		require.EqualValues(t, c.code, env.Error.Code, body)
		require.Equal(t, c.msg, env.Error.Msg, body)
	}
	require.Empty(t, e.fake.Refunds())
	require.EqualValues(t, 0, e.fake.Stats().RefundsRefused)

	// The key was never saved: a valid request with it executes. Parameters
	// Stripe knows but the emulator does not model (reverse_transfer) are
	// accepted and ignored, and every documented reason is accepted.
	for i, reason := range []string{"duplicate", "fraudulent", "requested_by_customer"} {
		form := url.Values{"payment_intent": {pi.ID}, "amount": {"100"}, "reason": {reason}, "reverse_transfer": {"false"}}
		h := hdr
		if i > 0 {
			h = nil
		}
		code, h, body := rawDo(t, e, http.MethodPost, "/v1/refunds", auth, h, form)
		require.Equal(t, http.StatusOK, code, body)
		require.Empty(t, h.Get("Idempotent-Replayed"))
		require.Contains(t, body, `"reason":"`+reason+`"`)
	}
	require.Len(t, e.fake.Refunds(), 3)
}

func TestRefundRetrieve(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	created, err := e.sc.Refunds.New(refundOf(pi.ID, 100, ""))
	require.NoError(t, err)

	got, err := e.sc.Refunds.Get(created.ID, nil)
	require.NoError(t, err)
	require.Equal(t, string(created.LastResponse.RawJSON), string(got.LastResponse.RawJSON))

	_, err = e.sc.Refunds.Get("re_nope", nil)
	se := stripeErr(t, err)
	require.Equal(t, http.StatusNotFound, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeResourceMissing, se.Code)
	require.Equal(t, "No such refund: 're_nope'", se.Msg)
	require.EqualValues(t, 2, e.fake.Stats().RefundRetrieves)

	code, _, _ := rawDo(t, e, http.MethodGet, "/v1/refunds/"+created.ID, "", nil, nil)
	require.Equal(t, http.StatusUnauthorized, code)
}

// Concurrent refunds never take back more than was received.
func TestRefundConcurrentNeverOverRefunds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")

	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.sc.Refunds.New(refundOf(pi.ID, 100, ""))
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.Equal(t, stripe.ErrorCodeAmountTooLarge, stripeErr(t, err).Code)
	}
	require.Equal(t, 12, ok)
	require.EqualValues(t, 1200, charge(t, e, pi.ID).AmountRefunded)
}
