package stripefake_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

func TestAdminRefunds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")

	// Refunds of this PaymentIntent start pending from now on.
	code, body := postJSON(t, e, "/_fake/payment_intents/"+pi.ID+"/refund_outcome", `{"status":"pending"}`)
	require.Equal(t, http.StatusOK, code, body)
	require.JSONEq(t, `{"status":"pending"}`, body)
	p := refundOf(pi.ID, 1000, "adm-refund")
	p.Reason = stripe.String("duplicate")
	p.AddMetadata("refund_id", "7")
	rf, err := e.sc.Refunds.New(p)
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusPending, rf.Status)

	code, _, body = rawDo(t, e, http.MethodGet, "/_fake/refunds", "", nil, nil)
	require.Equal(t, http.StatusOK, code)
	var rfs []stripefake.Refund
	require.NoError(t, json.Unmarshal([]byte(body), &rfs))
	require.Equal(t, e.fake.Refunds(), rfs)
	require.Len(t, rfs, 1)
	require.Equal(t, rf.ID, rfs[0].ID)
	require.Equal(t, stripefake.RefundPending, rfs[0].Status)
	require.Equal(t, "duplicate", rfs[0].Reason)
	require.Equal(t, "7", rfs[0].Metadata["refund_id"])
	require.Equal(t, "adm-refund", rfs[0].IdempotencyKey)
	for _, field := range []string{"id", "payment_intent", "charge", "amount", "currency", "status", "reason", "metadata",
		"created", "idempotency_key"} {
		require.Contains(t, body, `"`+field+`":`)
	}

	// Move it on: failed, with a reason; the amount is refundable again.
	code, body = postJSON(t, e, "/_fake/refunds/"+rf.ID+"/status", `{"status":"failed","failure_reason":"lost_or_stolen_card"}`)
	require.Equal(t, http.StatusOK, code, body)
	var moved stripefake.Refund
	require.NoError(t, json.Unmarshal([]byte(body), &moved))
	require.Equal(t, stripefake.RefundFailed, moved.Status)
	require.Equal(t, stripefake.RefundFailureLostOrStolenCard, moved.FailureReason)
	require.Contains(t, body, `"failure_reason":"lost_or_stolen_card"`)
	require.EqualValues(t, 0, charge(t, e, pi.ID).AmountRefunded)

	// {} restores the card's behaviour: succeeded at once.
	code, _ = postJSON(t, e, "/_fake/payment_intents/"+pi.ID+"/refund_outcome", `{}`)
	require.Equal(t, http.StatusOK, code)
	rf, err = e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusSucceeded, rf.Status)
	require.EqualValues(t, 1234, rf.Amount)

	for _, c := range []struct {
		path, body string
		code       int
	}{
		{"/_fake/refunds/re_nope/status", `{"status":"failed"}`, http.StatusNotFound},
		{"/_fake/refunds/" + moved.ID + "/status", `{"status":"succeeded"}`, http.StatusBadRequest},
		{"/_fake/refunds/" + rf.ID + "/status", `{"status":"pending"}`, http.StatusBadRequest},
		{"/_fake/refunds/" + rf.ID + "/status", `{"status":"failed","failure_reason":"bored"}`, http.StatusBadRequest},
		{"/_fake/refunds/" + rf.ID + "/status", `{"status":"failed","extra":1}`, http.StatusBadRequest},
		{"/_fake/refunds/" + rf.ID + "/status", `not json`, http.StatusBadRequest},
		{"/_fake/payment_intents/pi_nope/refund_outcome", `{"status":"pending"}`, http.StatusNotFound},
		{"/_fake/payment_intents/" + pi.ID + "/refund_outcome", `{"status":"canceled"}`, http.StatusBadRequest},
		{"/_fake/payment_intents/" + pi.ID + "/refund_outcome", `{"status":"pending","failure_reason":"declined"}`, http.StatusBadRequest},
	} {
		code, body := postJSON(t, e, c.path, c.body)
		require.Equal(t, c.code, code, c.path+" "+c.body)
		require.Contains(t, body, `"type":"invalid_request_error"`)
	}

	_, _, raw := rawDo(t, e, http.MethodGet, "/_fake/stats", "", nil, nil)
	for _, name := range []string{"refund_create_requests", "refunds_created", "refunds_refused", "refunds_failed",
		"refund_status_changes", "refund_retrieves", "refund_lists"} {
		require.Contains(t, raw, `"`+name+`":`)
	}
	st := e.fake.Stats()
	require.EqualValues(t, 2, st.RefundsCreated)
	require.EqualValues(t, 1, st.RefundsFailed)
	require.EqualValues(t, 1, st.RefundStatusChanges)

	// Admin answers carry amount_refunded in the PaymentIntent snapshots.
	_, _, raw = rawDo(t, e, http.MethodGet, "/_fake/payment_intents", "", nil, nil)
	require.Contains(t, raw, `"amount_refunded":1234`)
}

// Refunds through the admin fault endpoint: injected faults reach refunds.
func TestAdminFaultsReachRefunds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	code, _ := postJSON(t, e, "/_fake/faults", `{"inject":[{"kind":"500_charged"}]}`)
	require.Equal(t, http.StatusOK, code)
	_, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "adm-500c"))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	require.Len(t, e.fake.Refunds(), 1)
}
