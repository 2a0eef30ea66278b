package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

func TestCheckWebhooks(t *testing.T) {
	at := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	delivered := func(id, typ, object string, when time.Time) stripefake.Event {
		return stripefake.Event{ID: id, Type: typ, ObjectID: object, Status: stripefake.EventDelivered, Attempts: 1, Answered: 1, DeliveredAt: &when}
	}
	row := func(id, typ, object, outcome string) *EventRow {
		return &EventRow{ID: id, Type: typ, ObjectID: &object, Outcome: outcome}
	}
	w := &Webhooks{
		Events: []stripefake.Event{
			delivered("evt_1", "payment_intent.succeeded", "pi_1", at),
			delivered("evt_2", "refund.created", "re_1", at),
			{ID: "evt_3", Type: "refund.updated", ObjectID: "re_1", Status: stripefake.EventPending, Attempts: 9, LastError: "503"},
			delivered("evt_4", "payment_intent.created", "pi_2", at),
			delivered("evt_5", "payment_intent.created", "pi_3", at),
		},
		Rows: map[string]*EventRow{
			"evt_1": row("evt_1", "payment_intent.succeeded", "pi_1", "applied"),
			"evt_2": row("evt_2", "refund.created", "re_1", "ignored"),
			"evt_4": row("evt_4", "payment_intent.created", "pi_9", "ignored"),
			"evt_x": row("evt_x", "customer.created", "cus_1", "ignored"),
		},
	}
	c, lost := checkWebhooks(w, nil)
	require.Equal(t, 5, c.Checked)
	require.Zero(t, lost)
	require.Equal(t, 4, c.Violations, "%v", c.Details)
	require.Contains(t, c.Details[0], "evt_3 (refund.updated of re_1) is pending after 9 attempts")
	require.Contains(t, c.Details[1], "is recorded as payment_intent.created of pi_9")
	require.Contains(t, c.Details[2], "evt_5 (payment_intent.created of pi_3) was answered 1 times, but is not in stripe_events")
	require.Contains(t, c.Details[3], "evt_x (customer.created), which the emulator never made")

	// An asynchronous failover may lose what was delivered before the
	// promotion, not what came after.
	rec := &Recovery{Mode: FailoverAsync}
	rec.Failover.StoppedAt, rec.Failover.PromotedAt = at.Add(-time.Second), at.Add(time.Second)
	w = &Webhooks{Events: []stripefake.Event{delivered("evt_1", "refund.created", "re_1", at), delivered("evt_2", "refund.created", "re_2", at.Add(time.Minute))}, Rows: map[string]*EventRow{}}
	c, lost = checkWebhooks(w, rec)
	require.Equal(t, 1, lost)
	require.Equal(t, 1, c.Violations, "%v", c.Details)
	require.Contains(t, c.Details[0], "evt_2")

	// A PaymentIntent whose payment the failover lost, re-adopted by the
	// verdict: its succeeded and its authorized events may be alarms.
	rec.Recorded = map[string]bool{"pi_1": true}
	alarm := func(id, typ string) *EventRow { return row(id, typ, "pi_1", "alarm") }
	w = &Webhooks{
		Events: []stripefake.Event{
			delivered("evt_1", "payment_intent.succeeded", "pi_1", at.Add(time.Minute)),
			delivered("evt_2", "payment_intent.amount_capturable_updated", "pi_1", at.Add(time.Minute)),
			delivered("evt_3", "payment_intent.payment_failed", "pi_1", at.Add(time.Minute)),
		},
		Rows: map[string]*EventRow{
			"evt_1": alarm("evt_1", "payment_intent.succeeded"),
			"evt_2": alarm("evt_2", "payment_intent.amount_capturable_updated"),
			"evt_3": alarm("evt_3", "payment_intent.payment_failed"),
		},
	}
	c, _ = checkWebhooks(w, rec)
	require.Equal(t, 2, w.AlarmedByFailover)
	require.Equal(t, 1, c.Violations, "%v", c.Details)
	require.Contains(t, c.Details[0], "evt_3")

	// A Refund whose refund the failover lost, re-adopted by the verdict:
	// its events may be alarms. One no refund records stays a violation.
	rec.Recorded = map[string]bool{"re_1": true}
	w = &Webhooks{
		Events: []stripefake.Event{
			delivered("evt_1", "refund.created", "re_1", at.Add(time.Minute)),
			delivered("evt_2", "refund.updated", "re_1", at.Add(time.Minute)),
			delivered("evt_3", "charge.refund.updated", "re_1", at.Add(time.Minute)),
			delivered("evt_4", "refund.updated", "re_2", at.Add(time.Minute)),
		},
		Rows: map[string]*EventRow{
			"evt_1": row("evt_1", "refund.created", "re_1", "alarm"),
			"evt_2": row("evt_2", "refund.updated", "re_1", "alarm"),
			"evt_3": row("evt_3", "charge.refund.updated", "re_1", "alarm"),
			"evt_4": row("evt_4", "refund.updated", "re_2", "alarm"),
		},
	}
	c, _ = checkWebhooks(w, rec)
	require.Equal(t, 3, w.AlarmedByFailover)
	require.Equal(t, 1, c.Violations, "%v", c.Details)
	require.Contains(t, c.Details[0], "evt_4")

	// Without a failover, the alarms of the PaymentIntents and Refunds a
	// lost-history fault left without their rows are explained, whether or
	// not re-adopted; a failed PaymentIntent's alarm is not.
	w = &Webhooks{
		Events: []stripefake.Event{
			delivered("evt_1", "payment_intent.succeeded", "pi_1", at),
			delivered("evt_2", "refund.updated", "re_1", at),
			delivered("evt_3", "payment_intent.payment_failed", "pi_1", at),
		},
		Rows: map[string]*EventRow{
			"evt_1": row("evt_1", "payment_intent.succeeded", "pi_1", "alarm"),
			"evt_2": row("evt_2", "refund.updated", "re_1", "alarm"),
			"evt_3": row("evt_3", "payment_intent.payment_failed", "pi_1", "alarm"),
		},
		LostObjects: map[string]bool{"pi_1": true, "re_1": true},
	}
	c, _ = checkWebhooks(w, nil)
	require.Equal(t, 2, w.AlarmedByFailover)
	require.Equal(t, 1, c.Violations, "%v", c.Details)
	require.Contains(t, c.Details[0], "evt_3")
}

// The objects a lost-history fault left without their rows: the lost
// payment's PaymentIntent and the Refunds of its lost refund keys' intents;
// the objects rows record at the verdict: PaymentIntents and Refunds.
func TestLostAndRecordedObjects(t *testing.T) {
	_, snap, f := lostA()
	require.Equal(t, map[string]bool{"pi_a": true, "re_a": true}, lostObjects([]*LostHistory{f}, snap))
	recorded := recordedObjects(snap)
	require.True(t, recorded["pi_a"], "%v", recorded)
	require.True(t, recorded["re_a"], "%v", recorded)
}

func TestReasonShape(t *testing.T) {
	require.Equal(t, "payment N is succeeded already", reasonShape("payment 42 is succeeded already"))
	require.Equal(t, "no payment here was made for PaymentIntent pi_…", reasonShape("no payment here was made for PaymentIntent pi_3zNL53yROWpGAqEhkLRl8xtd"))
}
