package stripefake_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// An authorization not captured within the window is canceled by the
// emulator when Advance runs the window out: cancellation_reason
// automatic, canceled_at the end of the window, payment_intent.canceled
// with no request; a capture then is refused.
func TestAuthorizationExpiresWithAdvance(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	clock := newClock(time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC))
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{Now: clock.Now})
	pi := authorized(t, e, "e1")
	clock.Add(time.Hour)
	later := authorized(t, e, "e2")

	// Stripe's default window: 7 days after creation.
	e.fake.Advance(7*24*time.Hour - time.Hour - time.Second)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, retrieved(t, e, pi.ID).Status)
	e.fake.Advance(time.Second)
	got := retrieved(t, e, pi.ID)
	require.Equal(t, stripe.PaymentIntentStatusCanceled, got.Status)
	require.Equal(t, stripe.PaymentIntentCancellationReasonAutomatic, got.CancellationReason)
	require.Equal(t, pi.Created+int64((7*24*time.Hour).Seconds()), got.CanceledAt)
	require.Zero(t, got.AmountCapturable)
	require.Zero(t, got.AmountReceived)
	ch := charge(t, e, pi.ID)
	require.False(t, ch.Captured)
	require.True(t, ch.Refunded)
	require.EqualValues(t, 1234, ch.AmountRefunded)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, retrieved(t, e, later.ID).Status, "its window ends an hour later")

	_, err := e.sc.PaymentIntents.Capture(pi.ID, nil)
	requireUnexpectedState(t, err, pi.ID, stripe.PaymentIntentStatusCanceled)
	// The later one is captured in time.
	captured, err := e.sc.PaymentIntents.Capture(later.ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, captured.Status)
	e.fake.Advance(30 * 24 * time.Hour)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, retrieved(t, e, later.ID).Status, "a capture is not undone")

	events := settled(t, e)
	require.Equal(t, []string{
		"payment_intent.created", "payment_intent.amount_capturable_updated",
		"payment_intent.created", "payment_intent.amount_capturable_updated",
		"payment_intent.canceled", "payment_intent.succeeded",
	}, typesOf(events))
	var canceled stripe.Event
	require.NoError(t, json.Unmarshal(events[4].Payload, &canceled))
	require.Empty(t, canceled.Request.ID, "no request canceled it")
	require.Empty(t, canceled.Request.IdempotencyKey)
	require.Equal(t, pi.ID, canceled.Data.Object["id"])
	require.Equal(t, "automatic", canceled.Data.Object["cancellation_reason"])
	var succeeded stripe.Event
	require.NoError(t, json.Unmarshal(events[5].Payload, &succeeded))
	require.Equal(t, captured.LastResponse.RequestID, succeeded.Request.ID)

	st := e.fake.Stats()
	require.EqualValues(t, 2, st.Authorizations)
	require.EqualValues(t, 1, st.AuthorizationsExpired)
	require.EqualValues(t, 1, st.Captures)
	require.Zero(t, st.Cancels)
}

// Options.AuthorizationWindow shortens the window; every way of looking at
// the PaymentIntent sees it canceled once the window is over, and Backdate
// moves the end of the window with the creation.
func TestAuthorizationWindowOption(t *testing.T) {
	t.Parallel()
	clock := newClock(time.Date(2030, 3, 4, 5, 6, 7, 0, time.UTC))
	e := newEnv(t, stripefake.Options{Now: clock.Now, AuthorizationWindow: time.Minute})
	a := authorized(t, e, "w1")
	b := authorized(t, e, "w2")

	// The options' clock moved on (no Advance): the next request sees it.
	clock.Add(time.Minute)
	require.Equal(t, stripe.PaymentIntentStatusCanceled, listedStatus(t, e, a.ID))
	pis := e.fake.PaymentIntents()
	require.Equal(t, stripefake.StatusCanceled, pis[1].Status)
	require.Equal(t, "automatic", pis[1].CancellationReason)
	require.Equal(t, time.Unix(b.Created, 0).Add(time.Minute).UTC(), pis[1].CanceledAt)

	c := authorized(t, e, "w3")
	d := authorized(t, e, "w4")
	got, err := e.fake.Backdate(c.ID, 59*time.Second)
	require.NoError(t, err)
	require.Equal(t, stripefake.StatusRequiresCapture, got.Status)
	got, err = e.fake.Backdate(c.ID, time.Second)
	require.NoError(t, err)
	require.Equal(t, stripefake.StatusCanceled, got.Status, "its window ended when it was backdated")
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, retrieved(t, e, d.ID).Status)
	require.EqualValues(t, 3, e.fake.Stats().AuthorizationsExpired)
}

// The window ends in real time too: with the real clock, the emulator
// cancels the authorization by itself and sends the event, without any
// request coming.
func TestAuthorizationExpiresInRealTime(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{AuthorizationWindow: 500 * time.Millisecond})
	pi := authorized(t, e, "r1")
	captured := authorized(t, e, "r2")
	_, err := e.sc.PaymentIntents.Capture(captured.ID, nil)
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		return slices.Contains(typesOf(rcv.accepted()), "payment_intent.canceled")
	}, 10*time.Second, 10*time.Millisecond)
	var got stripe.Event
	for _, ev := range rcv.accepted() {
		if ev.Type == "payment_intent.canceled" {
			got = ev
		}
	}
	require.Equal(t, pi.ID, got.Data.Object["id"])
	require.Equal(t, "automatic", got.Data.Object["cancellation_reason"])
	require.Equal(t, stripe.PaymentIntentStatusCanceled, retrieved(t, e, pi.ID).Status)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, retrieved(t, e, captured.ID).Status)
	require.EqualValues(t, 1, e.fake.Stats().AuthorizationsExpired)
}

// After Close the timer is stopped: an authorization past its window is
// canceled when the next request or call comes.
func TestAuthorizationExpiresAfterCloseOnTheNextRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{AuthorizationWindow: 50 * time.Millisecond})
	pi := authorized(t, e, "z1")
	e.fake.Close()
	time.Sleep(100 * time.Millisecond)
	require.Equal(t, stripe.PaymentIntentStatusCanceled, retrieved(t, e, pi.ID).Status)
}
