package stripefake_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// eventsOf decodes the payloads of the events of type typ, in order.
func eventsOf(t *testing.T, events []stripefake.Event, typ string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, ev := range events {
		if ev.Type != typ {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(ev.Payload, &m))
		out = append(out, m)
	}
	return out
}

// Every refund.updated carries data.previous_attributes: the attributes
// that changed, with their values before; other events carry none.
func TestRefundUpdatedPreviousAttributes(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{})

	pending := paid(t, e, "pm_card_pendingRefund")
	r1, err := e.sc.Refunds.New(refundOf(pending.ID, 100, ""))
	require.NoError(t, err)
	_, err = e.fake.SetRefundStatus(r1.ID, stripefake.RefundSucceeded, "")
	require.NoError(t, err)
	_, err = e.fake.SetRefundStatus(r1.ID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	r2, err := e.sc.Refunds.New(refundOf(pending.ID, 100, ""))
	require.NoError(t, err)
	_, err = e.fake.SetRefundStatus(r2.ID, stripefake.RefundFailed, "")
	require.NoError(t, err)

	events := settled(t, e)
	updated := eventsOf(t, events, "refund.updated")
	require.Len(t, updated, 3)
	prev := func(i int) map[string]any {
		data := updated[i]["data"].(map[string]any)
		require.Contains(t, data, "previous_attributes")
		return data["previous_attributes"].(map[string]any)
	}
	require.Equal(t, map[string]any{"status": "pending"}, prev(0))
	require.Equal(t, map[string]any{
		"status": "succeeded", "failure_reason": nil, "failure_balance_transaction": nil,
	}, prev(1))
	require.Equal(t, map[string]any{
		"status": "pending", "failure_reason": nil, "failure_balance_transaction": nil,
	}, prev(2))

	for _, typ := range []string{"refund.created", "payment_intent.created", "payment_intent.succeeded"} {
		for _, ev := range eventsOf(t, events, typ) {
			require.NotContains(t, ev["data"], "previous_attributes", typ)
		}
	}

	// stripe-go reads it where paymentsd would (deliveries may arrive in
	// any order).
	byID := map[string]stripe.Event{}
	for _, ev := range rcv.accepted() {
		byID[ev.ID] = ev
	}
	first, ok := byID[updated[0]["id"].(string)]
	require.True(t, ok)
	require.Equal(t, "pending", first.Data.PreviousAttributes["status"])
}

// A refund of pm_card_refundFail fails right after its create answered
// succeeded: its refund.updated says it was succeeded.
func TestRefundFailCardPreviousAttributes(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{})
	pi := paid(t, e, "pm_card_refundFail")
	_, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.NoError(t, err)

	updated := eventsOf(t, settled(t, e), "refund.updated")
	require.Len(t, updated, 1)
	data := updated[0]["data"].(map[string]any)
	require.Equal(t, map[string]any{
		"status": "succeeded", "failure_reason": nil, "failure_balance_transaction": nil,
	}, data["previous_attributes"])
	require.Equal(t, "failed", data["object"].(map[string]any)["status"])
}
