package stripefake_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// processing creates a PaymentIntent with pm_card_processing and checks that
// the create answered it processing.
func processing(t *testing.T, e *env, paymentID string) *stripe.PaymentIntent {
	t.Helper()
	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_processing", paymentID, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusProcessing, pi.Status)
	return pi
}

// retrieved reads a PaymentIntent through the API.
func retrieved(t *testing.T, e *env, id string) *stripe.PaymentIntent {
	t.Helper()
	pi, err := e.sc.PaymentIntents.Get(id, nil)
	require.NoError(t, err)
	return pi
}

// listedStatus is the status the list shows of PaymentIntent id.
func listedStatus(t *testing.T, e *env, id string) stripe.PaymentIntentStatus {
	t.Helper()
	it := e.sc.PaymentIntents.List(&stripe.PaymentIntentListParams{})
	for it.Next() {
		if it.PaymentIntent().ID == id {
			return it.PaymentIntent().Status
		}
	}
	require.NoError(t, it.Err())
	t.Fatalf("%s not listed", id)
	return ""
}

// searchedIDs are the ids a search finds.
func searchedIDs(t *testing.T, e *env, query string) []string {
	t.Helper()
	var ids []string
	for _, pi := range search(t, e, query) {
		ids = append(ids, pi.ID)
	}
	return ids
}

// A PaymentIntent paid with pm_card_processing stays processing, on every
// read, unrefundable, until the test moves it on to succeeded.
func TestProcessingUntilSucceeded(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{})

	pi := processing(t, e, "p1")
	require.Zero(t, pi.AmountReceived)
	require.NotNil(t, pi.LatestCharge)
	require.Equal(t, stripe.ChargeStatusPending, pi.LatestCharge.Status)
	require.False(t, pi.LatestCharge.Paid)
	require.Nil(t, pi.LastPaymentError)

	require.Equal(t, stripe.PaymentIntentStatusProcessing, retrieved(t, e, pi.ID).Status)
	require.Equal(t, stripe.PaymentIntentStatusProcessing, listedStatus(t, e, pi.ID))
	require.Equal(t, []string{pi.ID}, searchedIDs(t, e, "status:'processing'"))
	_, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.Equal(t, stripe.ErrorCode("charge_not_refundable"), stripeErr(t, err).Code, "nothing to refund yet")
	_, err = e.fake.OpenDispute(pi.ID, "")
	require.Error(t, err, "nothing to dispute yet")

	got, err := e.fake.SetPaymentIntentStatus(pi.ID, stripefake.StatusSucceeded, "")
	require.NoError(t, err)
	require.Equal(t, stripefake.StatusSucceeded, got.Status)
	require.EqualValues(t, 1234, got.AmountReceived)

	after := retrieved(t, e, pi.ID)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, after.Status)
	require.EqualValues(t, 1234, after.AmountReceived)
	require.Equal(t, stripe.ChargeStatusSucceeded, charge(t, e, pi.ID).Status)
	require.True(t, charge(t, e, pi.ID).Paid)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, listedStatus(t, e, pi.ID))
	require.Empty(t, searchedIDs(t, e, "status:'processing'"))
	require.Equal(t, []string{pi.ID}, searchedIDs(t, e, "status:'succeeded'"))
	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.NoError(t, err, "refundable once succeeded")
	require.EqualValues(t, 1234, rf.Amount)

	events := settled(t, e)
	require.Equal(t, []string{
		"payment_intent.created", "payment_intent.processing", "payment_intent.succeeded", "refund.created",
	}, typesOf(events))
	var ev stripe.Event
	require.NoError(t, json.Unmarshal(events[2].Payload, &ev))
	var obj stripe.PaymentIntent
	require.NoError(t, json.Unmarshal(ev.Data.Raw, &obj))
	require.Equal(t, pi.ID, obj.ID)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, obj.Status)
	require.EqualValues(t, 1234, obj.AmountReceived)
	require.Empty(t, ev.Request.ID, "no API request settled it")
}

// Moved on to requires_payment_method, it failed: last_payment_error holds
// the decline, payment_intent.payment_failed is sent.
func TestProcessingUntilFailed(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{})
	pi := processing(t, e, "p2")

	_, err := e.fake.SetPaymentIntentStatus(pi.ID, stripefake.StatusRequiresPaymentMethod, "insufficient_funds")
	require.NoError(t, err)
	after := retrieved(t, e, pi.ID)
	require.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, after.Status)
	require.Zero(t, after.AmountReceived)
	require.NotNil(t, after.LastPaymentError)
	require.Equal(t, stripe.DeclineCodeInsufficientFunds, after.LastPaymentError.DeclineCode)
	require.Equal(t, "Your card has insufficient funds.", after.LastPaymentError.Msg)
	require.Equal(t, "pm_card_processing", after.LastPaymentError.PaymentMethod.ID)
	require.Equal(t, stripe.ChargeStatusFailed, charge(t, e, pi.ID).Status)
	require.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, listedStatus(t, e, pi.ID))
	require.Equal(t, []string{pi.ID}, searchedIDs(t, e, "status:'requires_payment_method'"))

	events := settled(t, e)
	require.Equal(t, []string{
		"payment_intent.created", "payment_intent.processing", "payment_intent.payment_failed",
	}, typesOf(events))
	var ev stripe.Event
	require.NoError(t, json.Unmarshal(events[2].Payload, &ev))
	var obj stripe.PaymentIntent
	require.NoError(t, json.Unmarshal(ev.Data.Raw, &obj))
	require.Equal(t, stripe.DeclineCodeInsufficientFunds, obj.LastPaymentError.DeclineCode)

	// No decline code: generic_decline.
	pi2 := processing(t, e, "p3")
	got, err := e.fake.SetPaymentIntentStatus(pi2.ID, stripefake.StatusRequiresPaymentMethod, "")
	require.NoError(t, err)
	require.Equal(t, "generic_decline", got.DeclineCode)
}

// Only a processing PaymentIntent settles, only to succeeded or failed.
func TestSetPaymentIntentStatusRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	done := paid(t, e, "pm_card_visa")
	pi := processing(t, e, "p4")

	_, err := e.fake.SetPaymentIntentStatus("pi_nope", stripefake.StatusSucceeded, "")
	require.True(t, errors.Is(err, stripefake.ErrNoSuchPaymentIntent), err)
	_, err = e.fake.SetPaymentIntentStatus(done.ID, stripefake.StatusRequiresPaymentMethod, "")
	require.True(t, errors.Is(err, stripefake.ErrNotProcessing), err)
	_, err = e.fake.SetPaymentIntentStatus(pi.ID, stripefake.StatusProcessing, "")
	require.Error(t, err)
	_, err = e.fake.SetPaymentIntentStatus(pi.ID, stripefake.StatusSucceeded, "insufficient_funds")
	require.Error(t, err, "a decline code only with a failure")
	_, err = e.fake.SetPaymentIntentStatus(pi.ID, stripefake.StatusRequiresPaymentMethod, "no_such_code")
	require.Error(t, err)
	require.Equal(t, stripe.PaymentIntentStatusProcessing, retrieved(t, e, pi.ID).Status, "refusals change nothing")

	_, err = e.fake.SetPaymentIntentStatus(pi.ID, stripefake.StatusSucceeded, "")
	require.NoError(t, err)
	_, err = e.fake.SetPaymentIntentStatus(pi.ID, stripefake.StatusRequiresPaymentMethod, "")
	require.True(t, errors.Is(err, stripefake.ErrNotProcessing), "settled once: %v", err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, retrieved(t, e, pi.ID).Status)
}

// POST /_fake/payment_intents/{id}/status is SetPaymentIntentStatus.
func TestAdminPaymentIntentStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := processing(t, e, "p5")

	code, body := postJSON(t, e, "/_fake/payment_intents/pi_nope/status", `{"status":"succeeded"}`)
	require.Equal(t, http.StatusNotFound, code, body)
	code, body = postJSON(t, e, "/_fake/payment_intents/"+pi.ID+"/status", `{"status":"canceled"}`)
	require.Equal(t, http.StatusBadRequest, code, body)
	code, body = postJSON(t, e, "/_fake/payment_intents/"+pi.ID+"/status",
		`{"status":"requires_payment_method","decline_code":"lost_card"}`)
	require.Equal(t, http.StatusOK, code, body)
	var got stripefake.PaymentIntent
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Equal(t, stripefake.StatusRequiresPaymentMethod, got.Status)
	require.Equal(t, "lost_card", got.DeclineCode)
	require.Equal(t, stripe.DeclineCodeLostCard, retrieved(t, e, pi.ID).LastPaymentError.DeclineCode)
	code, body = postJSON(t, e, "/_fake/payment_intents/"+pi.ID+"/status", `{"status":"succeeded"}`)
	require.Equal(t, http.StatusBadRequest, code, "not processing any more: %s", body)
}
