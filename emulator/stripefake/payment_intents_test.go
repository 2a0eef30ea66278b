package stripefake_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

var piIDPattern = regexp.MustCompile(`^pi_[A-Za-z0-9]{24}$`)

func TestCreateSucceeds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	for _, pm := range []string{"pm_card_visa", "pm_card_mastercard"} {
		pi, err := e.sc.PaymentIntents.New(piParams(pm, "42", ""))
		require.NoError(t, err)
		require.Regexp(t, piIDPattern, pi.ID)
		require.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)
		require.EqualValues(t, 1234, pi.Amount)
		require.EqualValues(t, 1234, pi.AmountReceived)
		require.Equal(t, stripe.CurrencyUSD, pi.Currency)
		require.Equal(t, "42", pi.Metadata["payment_id"])
		require.Equal(t, "order 42", pi.Description)
		require.NotNil(t, pi.LatestCharge)
		require.Regexp(t, `^ch_`, pi.LatestCharge.ID)
		require.NotNil(t, pi.PaymentMethod)
		require.Equal(t, pm, pi.PaymentMethod.ID)
		require.False(t, pi.Livemode)
		require.Contains(t, pi.ClientSecret, pi.ID+"_secret_")
		require.InDelta(t, time.Now().Unix(), pi.Created, 5)
		require.NotEmpty(t, pi.LastResponse.RequestID)
		require.Regexp(t, `^req_`, pi.LastResponse.RequestID)
	}

	pis := e.fake.PaymentIntents()
	require.Len(t, pis, 2)
	require.Equal(t, "pm_card_visa", pis[0].PaymentMethod)
	require.Equal(t, "42", pis[0].Metadata["payment_id"])
	require.Equal(t, stripefake.StatusSucceeded, pis[1].Status)
}

func TestCreateWithoutConfirm(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	p := piParams("pm_card_visa", "1", "")
	p.Confirm = nil
	pi, err := e.sc.PaymentIntents.New(p)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresConfirmation, pi.Status)
	require.Nil(t, pi.LatestCharge)
	require.Zero(t, pi.AmountReceived)

	p.PaymentMethod = nil
	pi, err = e.sc.PaymentIntents.New(p)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, pi.Status)
}

func TestDeclineAndReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	cases := map[string]stripe.DeclineCode{
		"pm_card_chargeDeclined":                  stripe.DeclineCodeGenericDecline,
		"pm_card_chargeDeclinedInsufficientFunds": stripe.DeclineCodeInsufficientFunds,
	}
	for pm, decline := range cases {
		key := "decline-" + pm
		_, err := e.sc.PaymentIntents.New(piParams(pm, "7", key))
		se := stripeErr(t, err)
		require.Equal(t, stripe.ErrorTypeCard, se.Type)
		require.Equal(t, stripe.ErrorCodeCardDeclined, se.Code)
		require.Equal(t, decline, se.DeclineCode)
		require.Equal(t, http.StatusPaymentRequired, se.HTTPStatusCode)
		require.NotEmpty(t, se.Msg)
		require.NotEmpty(t, se.RequestLogURL)
		require.NotNil(t, se.PaymentIntent)
		require.Regexp(t, piIDPattern, se.PaymentIntent.ID)
		require.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, se.PaymentIntent.Status)
		require.NotNil(t, se.PaymentIntent.LastPaymentError)
		require.Equal(t, decline, se.PaymentIntent.LastPaymentError.DeclineCode)
		var card *stripe.CardError
		require.ErrorAs(t, err, &card)
		require.Empty(t, se.LastResponse.Header.Get("Idempotent-Replayed"))

		_, err = e.sc.PaymentIntents.New(piParams(pm, "7", key))
		replay := stripeErr(t, err)
		require.Equal(t, "true", replay.LastResponse.Header.Get("Idempotent-Replayed"))
		require.Equal(t, se.RequestID, replay.LastResponse.Header.Get("Original-Request"))
		require.Equal(t, http.StatusPaymentRequired, replay.HTTPStatusCode)
		require.Equal(t, se.PaymentIntent.ID, replay.PaymentIntent.ID)
		require.Equal(t, string(se.LastResponse.RawJSON), string(replay.LastResponse.RawJSON))
	}

	st := e.fake.Stats()
	require.EqualValues(t, 2, st.Declines)
	require.EqualValues(t, 2, st.PaymentIntentsCreated)
	require.EqualValues(t, 2, st.Replays)
	require.EqualValues(t, 4, st.CreateRequests)
	for _, pi := range e.fake.PaymentIntents() {
		require.Equal(t, stripefake.StatusRequiresPaymentMethod, pi.Status)
		require.NotEmpty(t, pi.DeclineCode)
	}
}

func TestUnknownPaymentMethod(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	_, err := e.sc.PaymentIntents.New(piParams("pm_nope", "1", "unknown-pm"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
	require.Equal(t, stripe.ErrorCodeResourceMissing, se.Code)
	require.Equal(t, "payment_method", se.Param)
	require.Equal(t, "No such PaymentMethod: 'pm_nope'", se.Msg)
	require.Empty(t, e.fake.PaymentIntents())

	// Executed, so saved: the same key replays the 400.
	_, err = e.sc.PaymentIntents.New(piParams("pm_nope", "1", "unknown-pm"))
	se = stripeErr(t, err)
	require.Equal(t, "true", se.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, stripe.ErrorCodeResourceMissing, se.Code)
	require.EqualValues(t, 1, e.fake.Stats().InvalidRequests)
}

func TestValidationErrorsAreNotSaved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	auth := "Bearer sk_test_123"
	hdr := http.Header{"Idempotency-Key": {"validation"}}

	bad := []url.Values{
		{"currency": {"usd"}},
		{"amount": {"abc"}, "currency": {"usd"}},
		{"amount": {"0"}, "currency": {"usd"}},
		{"amount": {"100"}},
		{"amount": {"100"}, "currency": {"dollars"}},
		{"amount": {"100"}, "currency": {"usd"}, "confirm": {"maybe"}},
		{"amount": {"100"}, "currency": {"usd"}, "confirm": {"true"}},
	}
	for _, form := range bad {
		code, h, body := rawDo(t, e, http.MethodPost, "/v1/payment_intents", auth, hdr, form)
		require.Equal(t, http.StatusBadRequest, code, body)
		require.Empty(t, h.Get("Idempotent-Replayed"))
		var env struct{ Error stripe.Error }
		require.NoError(t, json.Unmarshal([]byte(body), &env))
		require.Equal(t, stripe.ErrorTypeInvalidRequest, env.Error.Type, body)
		require.NotEmpty(t, env.Error.Param, body)
	}
	// The key was never saved, so a valid request with it executes.
	form := url.Values{"amount": {"100"}, "currency": {"USD"}, "payment_method": {"pm_card_visa"},
		"confirm": {"true"}, "expand[]": {"latest_charge"}, "shipping[address][line1]": {"x"}}
	code, h, body := rawDo(t, e, http.MethodPost, "/v1/payment_intents", auth, hdr, form)
	require.Equal(t, http.StatusOK, code, body)
	require.Empty(t, h.Get("Idempotent-Replayed"))
	require.Equal(t, "validation", h.Get("Idempotency-Key"))
	require.Contains(t, body, `"currency":"usd"`)
	require.EqualValues(t, len(bad), e.fake.Stats().InvalidRequests)
}

func TestAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	_, err := newClient(e.srv, "pk_test_123").PaymentIntents.New(piParams("pm_card_visa", "1", ""))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusUnauthorized, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)

	code, h, body := rawDo(t, e, http.MethodGet, "/v1/payment_intents/pi_x", "", nil, nil)
	require.Equal(t, http.StatusUnauthorized, code)
	require.Regexp(t, `^req_`, h.Get("Request-Id"))
	require.Contains(t, body, `"type":"invalid_request_error"`)
	require.EqualValues(t, 2, e.fake.Stats().Unauthorized)
	require.Empty(t, e.fake.PaymentIntents())
}

func TestRetrieve(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	created, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "9", ""))
	require.NoError(t, err)
	got, err := e.sc.PaymentIntents.Get(created.ID, nil)
	require.NoError(t, err)
	require.Equal(t, created.ID, got.ID)
	require.Equal(t, created.Status, got.Status)
	require.Equal(t, created.LatestCharge.ID, got.LatestCharge.ID)
	require.Equal(t, "9", got.Metadata["payment_id"])

	_, err = e.sc.PaymentIntents.Get("pi_doesnotexist", nil)
	se := stripeErr(t, err)
	require.Equal(t, http.StatusNotFound, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeResourceMissing, se.Code)

	code, _, _ := rawDo(t, e, http.MethodGet, "/v1/charges", "Bearer sk_test_123", nil, nil)
	require.Equal(t, http.StatusNotFound, code)
	require.EqualValues(t, 2, e.fake.Stats().Retrieves)
}

// expand[]=latest_charge renders the charge, with what was refunded of it;
// without the expansion latest_charge is an id.
func TestExpandLatestCharge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	created, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", ""))
	require.NoError(t, err)
	require.Contains(t, string(created.LastResponse.RawJSON), `"object":"charge"`)
	ch := created.LatestCharge
	require.Equal(t, created.ID, ch.PaymentIntent.ID)
	require.EqualValues(t, 1234, ch.Amount)
	require.EqualValues(t, 1234, ch.AmountCaptured)
	require.Zero(t, ch.AmountRefunded)
	require.True(t, ch.Paid)
	require.True(t, ch.Captured)
	require.False(t, ch.Refunded)
	require.Equal(t, stripe.ChargeStatusSucceeded, ch.Status)

	got, err := e.sc.PaymentIntents.Get(created.ID, nil)
	require.NoError(t, err)
	require.Contains(t, string(got.LastResponse.RawJSON), `"latest_charge":"`+ch.ID+`"`)

	_, err = e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclinedInsufficientFunds", "2", ""))
	declined := stripeErr(t, err).PaymentIntent
	failed := charge(t, e, declined.ID)
	require.Equal(t, stripe.ChargeStatusFailed, failed.Status)
	require.False(t, failed.Paid)
	require.Zero(t, failed.AmountCaptured)
	require.Equal(t, "card_declined", failed.FailureCode)

	it := e.sc.PaymentIntents.List(&stripe.PaymentIntentListParams{ListParams: stripe.ListParams{
		Expand: []*string{stripe.String("data.latest_charge")},
	}})
	n := 0
	for it.Next() {
		require.Equal(t, "charge", it.PaymentIntent().LatestCharge.Object)
		n++
	}
	require.NoError(t, it.Err())
	require.Equal(t, 2, n)
}
