package stripefake_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// manualParams builds confirmed create params with capture_method=manual.
func manualParams(pm, paymentID, key string) *stripe.PaymentIntentParams {
	p := piParams(pm, paymentID, key)
	p.CaptureMethod = stripe.String(string(stripe.PaymentIntentCaptureMethodManual))
	return p
}

// authorized creates a PaymentIntent of 1234 usd authorized on pm_card_visa
// with capture_method=manual.
func authorized(t *testing.T, e *env, paymentID string) *stripe.PaymentIntent {
	t.Helper()
	pi, err := e.sc.PaymentIntents.New(manualParams("pm_card_visa", paymentID, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, pi.Status)
	return pi
}

// captureOf builds capture params: amount 0 leaves amount_to_capture out,
// key "" sends no Idempotency-Key.
func captureOf(amount int64, key string) *stripe.PaymentIntentCaptureParams {
	p := &stripe.PaymentIntentCaptureParams{}
	if amount > 0 {
		p.AmountToCapture = stripe.Int64(amount)
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// cancelOf builds cancel params with an optional reason and key.
func cancelOf(reason, key string) *stripe.PaymentIntentCancelParams {
	p := &stripe.PaymentIntentCancelParams{}
	if reason != "" {
		p.CancellationReason = stripe.String(reason)
	}
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// requireUnexpectedState asserts err is Stripe's refusal of an operation
// the PaymentIntent's status does not allow, with the PaymentIntent (id, in
// status) in the error, and returns the message.
func requireUnexpectedState(t *testing.T, err error, id string, status stripe.PaymentIntentStatus) string {
	t.Helper()
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
	require.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, se.Code)
	require.Equal(t, "https://stripe.com/docs/error-codes/payment-intent-unexpected-state", se.DocURL)
	require.NotNil(t, se.PaymentIntent, "the PaymentIntent is in the error")
	require.Equal(t, id, se.PaymentIntent.ID)
	require.Equal(t, status, se.PaymentIntent.Status)
	return se.Msg
}

// capture_method=manual authorizes only; every PaymentIntent shows its
// capture_method, automatic_async unless another was given.
func TestManualCaptureAuthorizes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	pi := authorized(t, e, "m1")
	require.Equal(t, stripe.PaymentIntentCaptureMethodManual, pi.CaptureMethod)
	require.EqualValues(t, 1234, pi.Amount)
	require.EqualValues(t, 1234, pi.AmountCapturable)
	require.Zero(t, pi.AmountReceived)
	require.Zero(t, pi.CanceledAt)
	require.Empty(t, pi.CancellationReason)
	require.NotNil(t, pi.LatestCharge)
	ch := pi.LatestCharge // expanded by piParams
	require.False(t, ch.Captured)
	require.True(t, ch.Paid)
	require.Equal(t, stripe.ChargeStatusSucceeded, ch.Status)
	require.Zero(t, ch.AmountCaptured)
	require.Zero(t, ch.AmountRefunded)
	require.False(t, ch.Refunded)

	got := retrieved(t, e, pi.ID)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, got.Status)
	require.EqualValues(t, 1234, got.AmountCapturable)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, listedStatus(t, e, pi.ID))
	require.Equal(t, []string{pi.ID}, searchedIDs(t, e, "status:'requires_capture'"))

	// Nothing was received, so there is nothing to refund or dispute yet.
	_, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.Equal(t, "charge_not_refundable", string(stripeErr(t, err).Code))
	_, err = e.fake.OpenDispute(pi.ID, "")
	require.Error(t, err)

	// Not confirmed: nothing authorized.
	p := manualParams("pm_card_visa", "m2", "")
	p.Confirm = nil
	unconfirmed, err := e.sc.PaymentIntents.New(p)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresConfirmation, unconfirmed.Status)
	require.Zero(t, unconfirmed.AmountCapturable)
	require.Equal(t, stripe.PaymentIntentCaptureMethodManual, unconfirmed.CaptureMethod)

	// A decline is a decline, manual or not.
	_, err = e.sc.PaymentIntents.New(manualParams("pm_card_chargeDeclined", "m3", ""))
	se := stripeErr(t, err)
	require.Equal(t, stripe.ErrorCodeCardDeclined, se.Code)
	require.Equal(t, stripe.PaymentIntentCaptureMethodManual, se.PaymentIntent.CaptureMethod)
	require.Zero(t, se.PaymentIntent.AmountCapturable)

	auto := paid(t, e, "pm_card_visa")
	require.Equal(t, stripe.PaymentIntentCaptureMethodAutomaticAsync, auto.CaptureMethod)
	require.Zero(t, auto.AmountCapturable)
	require.True(t, auto.LatestCharge.Captured)
	p = piParams("pm_card_visa", "a2", "")
	p.CaptureMethod = stripe.String("automatic")
	explicit, err := e.sc.PaymentIntents.New(p)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, explicit.Status)
	require.Equal(t, stripe.PaymentIntentCaptureMethodAutomatic, explicit.CaptureMethod)

	// Another capture_method is a validation failure: nothing is made.
	code, _, body := rawDo(t, e, http.MethodPost, "/v1/payment_intents", "Bearer sk_test_123", nil,
		piForm(url.Values{"capture_method": {"later"}}))
	require.Equal(t, http.StatusBadRequest, code)
	se2 := errorOf(t, body)
	require.Equal(t, "capture_method", se2.Param)
	require.Equal(t, "Invalid capture_method: must be one of automatic, automatic_async, or manual", se2.Msg)

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.Authorizations)
	require.EqualValues(t, 5, st.PaymentIntentsCreated)
}

// A capture without amount_to_capture takes all that is capturable; the
// PaymentIntent succeeds, and retrieve, the charge and refunds show it.
func TestCaptureAll(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := authorized(t, e, "c1")

	p := captureOf(0, "cap-all")
	p.AddExpand("latest_charge")
	p.AddMetadata("captured_by", "test")
	p.AddMetadata("payment_id", "") // unset
	got, err := e.sc.PaymentIntents.Capture(pi.ID, p)
	require.NoError(t, err)
	require.Equal(t, pi.ID, got.ID)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status)
	require.EqualValues(t, 1234, got.AmountReceived)
	require.Zero(t, got.AmountCapturable)
	require.Equal(t, map[string]string{"captured_by": "test"}, got.Metadata)
	require.True(t, got.LatestCharge.Captured)
	require.EqualValues(t, 1234, got.LatestCharge.AmountCaptured)
	require.Zero(t, got.LatestCharge.AmountRefunded)
	require.False(t, got.LatestCharge.Refunded)

	after := retrieved(t, e, pi.ID)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, after.Status)
	require.EqualValues(t, 1234, after.AmountReceived)
	require.Zero(t, after.AmountCapturable)
	require.Equal(t, stripe.PaymentIntentCaptureMethodManual, after.CaptureMethod)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, listedStatus(t, e, pi.ID))

	// Captured once, and only once.
	_, err = e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, ""))
	msg := requireUnexpectedState(t, err, pi.ID, stripe.PaymentIntentStatusSucceeded)
	require.Equal(t, "This PaymentIntent could not be captured because it has a status of succeeded. "+
		"Only a PaymentIntent with one of the following statuses may be captured: requires_capture.", msg)

	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.NoError(t, err)
	require.EqualValues(t, 1234, rf.Amount)
	require.True(t, charge(t, e, pi.ID).Refunded)

	st := e.fake.Stats()
	require.EqualValues(t, 2, st.CaptureRequests)
	require.EqualValues(t, 1, st.Captures)
}

// A capture's metadata is merged into the PaymentIntent's before its
// payment_intent.succeeded is made, so the event names the capture's
// sender as a retrieve does: paymentsd credits a capture to the key its
// metadata names.
func TestCaptureMetadataReachesItsEvent(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, hookSecret, nil)
	e := hookEnv(t, rcv.srv.URL, stripefake.Options{})
	pi := authorized(t, e, "c-md")

	p := captureOf(600, "cap-md")
	p.AddMetadata("captured_by", "key-7")
	_, err := e.sc.PaymentIntents.Capture(pi.ID, p)
	require.NoError(t, err)
	want := map[string]string{"payment_id": "c-md", "captured_by": "key-7"}
	require.Equal(t, want, retrieved(t, e, pi.ID).Metadata)

	settled(t, e)
	var captured *stripe.PaymentIntent
	for _, ev := range rcv.accepted() {
		if ev.Type == "payment_intent.succeeded" {
			captured = &stripe.PaymentIntent{}
			require.NoError(t, json.Unmarshal(ev.Data.Raw, captured))
		}
	}
	require.NotNil(t, captured, "the capture's event was delivered")
	require.Equal(t, want, captured.Metadata)
	require.EqualValues(t, 600, captured.AmountReceived)
}

// A partial capture takes amount_to_capture and releases the rest: the
// charge counts the release as refunded, and refunds take at most what was
// received.
func TestCapturePartial(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := authorized(t, e, "c2")

	got, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(1000, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status)
	require.EqualValues(t, 1000, got.AmountReceived)
	require.Zero(t, got.AmountCapturable)
	require.EqualValues(t, 1234, got.Amount)

	ch := charge(t, e, pi.ID)
	require.True(t, ch.Captured)
	require.EqualValues(t, 1234, ch.Amount)
	require.EqualValues(t, 1000, ch.AmountCaptured)
	require.EqualValues(t, 234, ch.AmountRefunded, "the part not captured is released")
	require.False(t, ch.Refunded)

	_, err = e.sc.Refunds.New(refundOf(pi.ID, 1001, ""))
	se := stripeErr(t, err)
	require.Equal(t, "amount_too_large", string(se.Code))
	require.Equal(t, "Refund amount ($10.01) is greater than unrefunded amount on charge ($10.00)", se.Msg)
	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.NoError(t, err)
	require.EqualValues(t, 1000, rf.Amount, "a refund without an amount takes what was received")
	ch = charge(t, e, pi.ID)
	require.EqualValues(t, 1234, ch.AmountRefunded)
	require.True(t, ch.Refunded)
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 1, ""))
	require.Equal(t, "charge_already_refunded", string(stripeErr(t, err).Code))

	// Disputes dispute what was received.
	other := authorized(t, e, "c3")
	_, err = e.sc.PaymentIntents.Capture(other.ID, captureOf(600, ""))
	require.NoError(t, err)
	d, err := e.fake.OpenDispute(other.ID, "")
	require.NoError(t, err)
	require.EqualValues(t, 600, d.Amount)
}

// More than is capturable is refused, and the authorization stays.
func TestCaptureMoreThanCapturable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := authorized(t, e, "c4")

	_, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(1235, "too-much"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
	require.Equal(t, stripe.ErrorCodeAmountTooLarge, se.Code)
	require.Equal(t, "amount_to_capture", se.Param)
	require.Contains(t, se.Msg, "requested capture amount is greater than the authorized amount")
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, se.PaymentIntent.Status)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, retrieved(t, e, pi.ID).Status)

	// An executed refusal: saved under its key.
	_, err = e.sc.PaymentIntents.Capture(pi.ID, captureOf(1235, "too-much"))
	replay := stripeErr(t, err)
	require.Equal(t, stripe.ErrorCodeAmountTooLarge, replay.Code)
	require.Equal(t, "true", replay.LastResponse.Header.Get("Idempotent-Replayed"))

	// Not a positive integer: a validation failure, not saved.
	for _, bad := range []string{"0", "-5", "ten"} {
		code, _, body := rawDo(t, e, http.MethodPost, "/v1/payment_intents/"+pi.ID+"/capture", "Bearer sk_test_123",
			http.Header{"Idempotency-Key": {"bad-amount"}}, url.Values{"amount_to_capture": {bad}})
		require.Equal(t, http.StatusBadRequest, code, bad)
		require.Equal(t, "amount_to_capture", errorOf(t, body).Param, bad)
	}
	got, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(1234, "bad-amount"))
	require.NoError(t, err, "the key was not saved by the validation failures")
	require.EqualValues(t, 1234, got.AmountReceived)
}

// Capturing what is not requires_capture is Stripe's
// payment_intent_unexpected_state; an unknown PaymentIntent is a 404.
func TestCaptureRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	auto := paid(t, e, "pm_card_visa")
	_, err := e.sc.PaymentIntents.Capture(auto.ID, captureOf(0, ""))
	requireUnexpectedState(t, err, auto.ID, stripe.PaymentIntentStatusSucceeded)

	p := manualParams("pm_card_visa", "u", "")
	p.Confirm = nil
	unconfirmed, err := e.sc.PaymentIntents.New(p)
	require.NoError(t, err)
	_, err = e.sc.PaymentIntents.Capture(unconfirmed.ID, captureOf(0, ""))
	requireUnexpectedState(t, err, unconfirmed.ID, stripe.PaymentIntentStatusRequiresConfirmation)

	canceled := authorized(t, e, "x")
	_, err = e.sc.PaymentIntents.Cancel(canceled.ID, nil)
	require.NoError(t, err)
	_, err = e.sc.PaymentIntents.Capture(canceled.ID, captureOf(0, ""))
	msg := requireUnexpectedState(t, err, canceled.ID, stripe.PaymentIntentStatusCanceled)
	require.Contains(t, msg, "because it has a status of canceled")

	_, err = e.sc.PaymentIntents.Capture("pi_nope", captureOf(0, ""))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusNotFound, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeResourceMissing, se.Code)
	require.Equal(t, "No such payment_intent: 'pi_nope'", se.Msg)

	code, _, body := rawDo(t, e, http.MethodPost, "/v1/payment_intents/"+auto.ID+"/capture", "Bearer sk_test_123", nil,
		url.Values{"amount": {"5"}})
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "parameter_unknown", string(errorOf(t, body).Code))
	code, _, _ = rawDo(t, e, http.MethodPost, "/v1/payment_intents/"+auto.ID+"/capture", "", nil, nil)
	require.Equal(t, http.StatusUnauthorized, code)

	st := e.fake.Stats()
	require.EqualValues(t, 0, st.Captures)
	require.EqualValues(t, 5, st.CaptureRequests)
}

// A cancel ends a PaymentIntent that took no funds, an authorization
// included (its hold released), and nothing else.
func TestCancel(t *testing.T) {
	t.Parallel()
	clock := newClock(time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC))
	e := newEnv(t, stripefake.Options{Now: clock.Now})
	pi := authorized(t, e, "k1")
	clock.Add(time.Hour)

	p := cancelOf("requested_by_customer", "cancel-1")
	p.AddExpand("latest_charge")
	got, err := e.sc.PaymentIntents.Cancel(pi.ID, p)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusCanceled, got.Status)
	require.Equal(t, stripe.PaymentIntentCancellationReasonRequestedByCustomer, got.CancellationReason)
	require.Equal(t, clock.Now().Unix(), got.CanceledAt)
	require.Zero(t, got.AmountCapturable)
	require.Zero(t, got.AmountReceived)
	require.False(t, got.LatestCharge.Captured)
	require.EqualValues(t, 1234, got.LatestCharge.AmountRefunded, "the hold is released")
	require.True(t, got.LatestCharge.Refunded)

	after := retrieved(t, e, pi.ID)
	require.Equal(t, stripe.PaymentIntentStatusCanceled, after.Status)
	require.Equal(t, got.CanceledAt, after.CanceledAt)
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.Equal(t, "charge_not_refundable", string(stripeErr(t, err).Code))

	// Canceled once, and only once; what succeeded is refunded, not canceled.
	_, err = e.sc.PaymentIntents.Cancel(pi.ID, nil)
	requireUnexpectedState(t, err, pi.ID, stripe.PaymentIntentStatusCanceled)
	auto := paid(t, e, "pm_card_visa")
	_, err = e.sc.PaymentIntents.Cancel(auto.ID, nil)
	msg := requireUnexpectedState(t, err, auto.ID, stripe.PaymentIntentStatusSucceeded)
	require.Equal(t, "You cannot cancel this PaymentIntent because it has a status of succeeded. Only a PaymentIntent "+
		"with one of the following statuses may be canceled: requires_payment_method, requires_capture, "+
		"requires_confirmation, requires_action.", msg)
	captured := authorized(t, e, "k2")
	_, err = e.sc.PaymentIntents.Capture(captured.ID, nil)
	require.NoError(t, err)
	_, err = e.sc.PaymentIntents.Cancel(captured.ID, nil)
	requireUnexpectedState(t, err, captured.ID, stripe.PaymentIntentStatusSucceeded)
	settling := processing(t, e, "k3")
	_, err = e.sc.PaymentIntents.Cancel(settling.ID, nil)
	requireUnexpectedState(t, err, settling.ID, stripe.PaymentIntentStatusProcessing)

	// Nothing charged yet: canceled without a reason.
	p2 := piParams("pm_card_visa", "k4", "")
	p2.Confirm = nil
	unconfirmed, err := e.sc.PaymentIntents.New(p2)
	require.NoError(t, err)
	got, err = e.sc.PaymentIntents.Cancel(unconfirmed.ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusCanceled, got.Status)
	require.Empty(t, got.CancellationReason)
	require.Nil(t, got.LatestCharge)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_chargeDeclined", "k5", ""))
	declined := stripeErr(t, err).PaymentIntent
	got, err = e.sc.PaymentIntents.Cancel(declined.ID, cancelOf("abandoned", ""))
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentCancellationReasonAbandoned, got.CancellationReason)

	// A reason Stripe does not take is a validation failure.
	code, _, body := rawDo(t, e, http.MethodPost, "/v1/payment_intents/"+auto.ID+"/cancel", "Bearer sk_test_123", nil,
		url.Values{"cancellation_reason": {"automatic"}})
	require.Equal(t, http.StatusBadRequest, code)
	require.Equal(t, "cancellation_reason", errorOf(t, body).Param)
	_, err = e.sc.PaymentIntents.Cancel("pi_nope", nil)
	require.Equal(t, http.StatusNotFound, stripeErr(t, err).HTTPStatusCode)

	st := e.fake.Stats()
	require.EqualValues(t, 3, st.Cancels)
	require.EqualValues(t, 9, st.CancelRequests)
}

// Captures and cancels are idempotent exactly as creates are: the same key
// and parameters replay the saved answer, other parameters (or another
// PaymentIntent's path) are an idempotency_error, and a key still
// executing is in use.
func TestCaptureAndCancelIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := authorized(t, e, "i1")

	first, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(1000, "cap-key"))
	require.NoError(t, err)
	require.Empty(t, first.LastResponse.Header.Get("Idempotent-Replayed"))
	again, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(1000, "cap-key"))
	require.NoError(t, err, "a replay, not a second capture")
	require.Equal(t, "true", again.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, first.LastResponse.RequestID, again.LastResponse.Header.Get("Original-Request"))
	require.Equal(t, string(first.LastResponse.RawJSON), string(again.LastResponse.RawJSON))

	_, err = e.sc.PaymentIntents.Capture(pi.ID, captureOf(900, "cap-key"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
	other := authorized(t, e, "i2")
	_, err = e.sc.PaymentIntents.Capture(other.ID, captureOf(1000, "cap-key"))
	se = stripeErr(t, err)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
	require.Contains(t, se.Msg, "same endpoint")
	_, err = e.sc.PaymentIntents.Cancel(pi.ID, cancelOf("", "cap-key"))
	require.Equal(t, stripe.ErrorTypeIdempotency, stripeErr(t, err).Type)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, retrieved(t, e, other.ID).Status)

	c1, err := e.sc.PaymentIntents.Cancel(other.ID, cancelOf("duplicate", "cancel-key"))
	require.NoError(t, err)
	c2, err := e.sc.PaymentIntents.Cancel(other.ID, cancelOf("duplicate", "cancel-key"))
	require.NoError(t, err)
	require.Equal(t, "true", c2.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(c1.LastResponse.RawJSON), string(c2.LastResponse.RawJSON))
	_, err = e.sc.PaymentIntents.Cancel(other.ID, cancelOf("fraudulent", "cancel-key"))
	require.Equal(t, stripe.ErrorTypeIdempotency, stripeErr(t, err).Type)

	// A refusal is saved too: the replay is the same refusal.
	_, err = e.sc.PaymentIntents.Cancel(pi.ID, cancelOf("", "cancel-succeeded"))
	requireUnexpectedState(t, err, pi.ID, stripe.PaymentIntentStatusSucceeded)
	_, err = e.sc.PaymentIntents.Cancel(pi.ID, cancelOf("", "cancel-succeeded"))
	replay := stripeErr(t, err)
	require.Equal(t, "true", replay.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, replay.Code)

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.Captures)
	require.EqualValues(t, 1, st.Cancels)
	require.EqualValues(t, 3, st.Replays)
	require.EqualValues(t, 4, st.IdempotencyErrors)
}

// A second capture with the key of one still executing (hung) is a 409;
// after the release the key replays the capture.
func TestCaptureKeyInUseWhileHung(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := authorized(t, e, "h1")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultHang, Op: stripefake.OpCapturePaymentIntent})

	done := make(chan error, 1)
	go func() {
		_, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, "hung-capture"))
		done <- err
	}()
	require.Eventually(t, func() bool { return e.fake.Stats().HungNow == 1 }, 5*time.Second, time.Millisecond)
	_, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, "hung-capture"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusConflict, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeIdempotencyKeyInUse, se.Code)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, retrieved(t, e, pi.ID).Status)

	e.fake.ReleaseHangs()
	require.NoError(t, <-done)
	got, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, "hung-capture"))
	require.NoError(t, err)
	require.Equal(t, "true", got.LastResponse.Header.Get("Idempotent-Replayed"))
	require.EqualValues(t, 1, e.fake.Stats().Captures)
}

// The 500 that did capture: the funds are taken, the answer is a 500, the
// retry with the same key replays the 500, and retrieve tells the truth.
func TestCaptureFault500Charged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := authorized(t, e, "f1")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged, Op: stripefake.OpCapturePaymentIntent})

	_, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, "cap-500c"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeAPI, se.Type)

	_, err = e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, "cap-500c"))
	replay := stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, replay.HTTPStatusCode)
	require.Equal(t, "true", replay.LastResponse.Header.Get("Idempotent-Replayed"))

	got := retrieved(t, e, pi.ID)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status, "it did capture")
	require.EqualValues(t, 1234, got.AmountReceived)
	// A new key sees the capture done.
	_, err = e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, "cap-500c-2"))
	requireUnexpectedState(t, err, pi.ID, stripe.PaymentIntentStatusSucceeded)

	// And the 500 that did cancel.
	other := authorized(t, e, "f2")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged, Op: stripefake.OpCancelPaymentIntent})
	_, err = e.sc.PaymentIntents.Cancel(other.ID, cancelOf("", "cancel-500c"))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	require.Equal(t, stripe.PaymentIntentStatusCanceled, retrieved(t, e, other.ID).Status)

	st := e.fake.Stats()
	require.EqualValues(t, 2, st.Faults500Charged)
	require.EqualValues(t, 1, st.Captures)
	require.EqualValues(t, 1, st.Cancels)
}

// A plain 500 captures nothing and is saved: the same key replays it, a
// new key captures.
func TestCaptureFault500(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := authorized(t, e, "f3")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500, Op: stripefake.OpCapturePaymentIntent})

	_, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, "cap-500"))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, retrieved(t, e, pi.ID).Status)
	_, err = e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, "cap-500"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode)
	require.Equal(t, "true", se.LastResponse.Header.Get("Idempotent-Replayed"))

	got, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, "cap-500-2"))
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status)
}

// The answer to a capture (or a cancel) can be lost after it took place;
// the retry with the same key gets it.
func TestCaptureLostAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := authorized(t, e, "l1")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer, Op: stripefake.OpCapturePaymentIntent})

	_, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(700, "cap-lost"))
	requireNetworkError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, retrieved(t, e, pi.ID).Status)
	got, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(700, "cap-lost"))
	require.NoError(t, err)
	require.Equal(t, "true", got.LastResponse.Header.Get("Idempotent-Replayed"))
	require.EqualValues(t, 700, got.AmountReceived)

	other := authorized(t, e, "l2")
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer, Op: stripefake.OpCancelPaymentIntent})
	_, err = e.sc.PaymentIntents.Cancel(other.ID, cancelOf("", "cancel-lost"))
	requireNetworkError(t, err)
	c, err := e.sc.PaymentIntents.Cancel(other.ID, cancelOf("", "cancel-lost"))
	require.NoError(t, err)
	require.Equal(t, "true", c.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, stripe.PaymentIntentStatusCanceled, c.Status)
	require.EqualValues(t, 2, e.fake.Stats().LostAnswers)
}

// A slow capture outlives its client: it captures anyway, its key in use
// until then; a plain latency delays the answer.
func TestCaptureLatencyAndOutliveClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := authorized(t, e, "s1")
	const latency = 150 * time.Millisecond
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultLatency, Op: stripefake.OpCapturePaymentIntent, Latency: latency})
	start := time.Now()
	_, err := e.sc.PaymentIntents.Capture(pi.ID, nil)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), latency)

	other := authorized(t, e, "s2")
	e.fake.Inject(stripefake.Fault{
		Kind: stripefake.FaultOutliveClient, Op: stripefake.OpCancelPaymentIntent, Latency: 400 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	p := cancelOf("", "cancel-slow")
	p.Context = ctx
	_, err = e.sc.PaymentIntents.Cancel(other.ID, p)
	requireNetworkError(t, err)
	_, err = e.sc.PaymentIntents.Cancel(other.ID, cancelOf("", "cancel-slow"))
	require.Equal(t, stripe.ErrorCodeIdempotencyKeyInUse, stripeErr(t, err).Code)
	require.Eventually(t, func() bool { return e.fake.Stats().ExecutingNow == 0 }, 5*time.Second, 5*time.Millisecond)
	require.Equal(t, stripe.PaymentIntentStatusCanceled, retrieved(t, e, other.ID).Status)
	c, err := e.sc.PaymentIntents.Cancel(other.ID, cancelOf("", "cancel-slow"))
	require.NoError(t, err)
	require.Equal(t, "true", c.LastResponse.Header.Get("Idempotent-Replayed"))

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.OutliveClients)
	require.EqualValues(t, 1, st.ClientsGone)
}

// A fault with an Op waits for a write of its kind: other writes pass it
// by. One without an Op is taken by the next write, a capture included;
// chaos draws for captures and cancels too.
func TestFaultsTargetCaptureAndCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := authorized(t, e, "t1")
	e.fake.Inject(
		stripefake.Fault{Kind: stripefake.Fault500, Op: stripefake.OpCancelPaymentIntent},
		stripefake.Fault{Kind: stripefake.FaultIdempotencyError, Op: stripefake.OpCapturePaymentIntent},
	)
	paid(t, e, "pm_card_visa")
	_, err := e.sc.Refunds.New(refundOf(paid(t, e, "pm_card_visa").ID, 0, ""))
	require.NoError(t, err)
	require.Equal(t, 2, e.fake.PendingFaults(), "creates passed both by")

	_, err = e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, "t-cap"))
	require.Equal(t, stripe.ErrorTypeIdempotency, stripeErr(t, err).Type)
	require.Equal(t, 1, e.fake.PendingFaults())
	got, err := e.sc.PaymentIntents.Capture(pi.ID, captureOf(0, "t-cap"))
	require.NoError(t, err, "an injected idempotency_error saves nothing")
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status)

	other := authorized(t, e, "t2")
	_, err = e.sc.PaymentIntents.Cancel(other.ID, nil)
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	require.Equal(t, 0, e.fake.PendingFaults())
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, retrieved(t, e, other.ID).Status)

	e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500})
	_, err = e.sc.PaymentIntents.Capture(other.ID, nil)
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)

	e.fake.SetChaos(stripefake.Chaos{P500: 1})
	_, err = e.sc.PaymentIntents.Cancel(other.ID, nil)
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	e.fake.SetChaos(stripefake.Chaos{})
	_, err = e.sc.PaymentIntents.Cancel(other.ID, nil)
	require.NoError(t, err)

	require.Panics(t, func() { e.fake.Inject(stripefake.Fault{Kind: stripefake.Fault500, Op: "refund_payment_intent"}) })

	// The admin endpoint takes "op" too, and refuses one it does not know.
	third := authorized(t, e, "t3")
	code, _ := postJSON(t, e, "/_fake/faults", `{"inject":[{"kind":"500_charged","op":"capture_payment_intent"}]}`)
	require.Equal(t, http.StatusOK, code)
	paid(t, e, "pm_card_visa")
	_, err = e.sc.PaymentIntents.Capture(third.ID, nil)
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, retrieved(t, e, third.ID).Status)
	code, body := postJSON(t, e, "/_fake/faults", `{"inject":[{"kind":"500","op":"refund_payment_intent"}]}`)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, body, `unknown op \"refund_payment_intent\"`)
	require.Equal(t, 0, e.fake.PendingFaults())

	st := e.fake.Stats()
	require.EqualValues(t, 3, st.Faults500)
	require.EqualValues(t, 1, st.FaultsIdempotencyError)
	require.EqualValues(t, 1, st.Faults500Charged)
}

// A processing PaymentIntent with manual capture that goes through is
// authorized, not captured.
func TestProcessingManualCaptureIsAuthorized(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi, err := e.sc.PaymentIntents.New(manualParams("pm_card_processing", "p1", ""))
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusProcessing, pi.Status)
	require.Zero(t, pi.AmountCapturable)

	got, err := e.fake.SetPaymentIntentStatus(pi.ID, stripefake.StatusSucceeded, "")
	require.NoError(t, err)
	require.Equal(t, stripefake.StatusRequiresCapture, got.Status)
	require.EqualValues(t, 1234, got.AmountCapturable)
	require.Zero(t, got.AmountReceived)
	captured, err := e.sc.PaymentIntents.Capture(pi.ID, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1234, captured.AmountReceived)
}
