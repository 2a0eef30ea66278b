package stripefake_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// pm_card_pendingRefund: refunds start pending and hold their amount until
// they are moved on.
func TestRefundPendingThenSucceeded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_pendingRefund")

	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 1000, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusPending, rf.Status)
	require.EqualValues(t, 1000, charge(t, e, pi.ID).AmountRefunded)
	// The pending refund is reserved: only 234 remain.
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 235, ""))
	require.Equal(t, "Refund amount ($2.35) is greater than unrefunded amount on charge ($2.34)", stripeErr(t, err).Msg)

	got, err := e.fake.SetRefundStatus(rf.ID, stripefake.RefundSucceeded, "")
	require.NoError(t, err)
	require.Equal(t, stripefake.RefundSucceeded, got.Status)
	read, err := e.sc.Refunds.Get(rf.ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusSucceeded, read.Status)
	require.EqualValues(t, 1000, charge(t, e, pi.ID).AmountRefunded)

	// Moving to the same status is a no-op; out of succeeded only to failed.
	_, err = e.fake.SetRefundStatus(rf.ID, stripefake.RefundSucceeded, "")
	require.NoError(t, err)
	_, err = e.fake.SetRefundStatus(rf.ID, stripefake.RefundPending, "")
	require.Error(t, err)
	require.EqualValues(t, 1, e.fake.Stats().RefundStatusChanges)
}

func TestRefundPendingThenFailedGivesTheAmountBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_pendingRefund")

	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusPending, rf.Status)
	require.True(t, charge(t, e, pi.ID).Refunded)
	_, err = e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.Equal(t, stripe.ErrorCodeChargeAlreadyRefunded, stripeErr(t, err).Code)

	got, err := e.fake.SetRefundStatus(rf.ID, stripefake.RefundFailed, stripefake.RefundFailureLostOrStolenCard)
	require.NoError(t, err)
	require.Equal(t, stripefake.RefundFailed, got.Status)
	require.Equal(t, stripefake.RefundFailureLostOrStolenCard, got.FailureReason)

	read, err := e.sc.Refunds.Get(rf.ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusFailed, read.Status)
	require.Equal(t, stripe.RefundFailureReasonLostOrStolenCard, read.FailureReason)
	require.Regexp(t, `^txn_`, read.FailureBalanceTransaction.ID)
	ch := charge(t, e, pi.ID)
	require.EqualValues(t, 0, ch.AmountRefunded)
	require.False(t, ch.Refunded)

	// Failed is final.
	_, err = e.fake.SetRefundStatus(rf.ID, stripefake.RefundSucceeded, "")
	require.ErrorContains(t, err, "has failed")
	_, err = e.fake.SetRefundStatus(rf.ID, stripefake.RefundFailed, "")
	require.NoError(t, err) // no-op

	// The amount is refundable again (this refund starts pending too).
	again, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.NoError(t, err)
	require.EqualValues(t, 1234, again.Amount)
	st := e.fake.Stats()
	require.EqualValues(t, 1, st.RefundsFailed)
	require.EqualValues(t, 2, st.RefundsCreated)
}

// pm_card_refundFail, as Stripe documents it: the refund answers succeeded
// and is failed, with expired_or_canceled_card, on every later read.
func TestRefundFailCard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_refundFail")

	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "rfail"))
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusSucceeded, rf.Status)
	require.Empty(t, rf.FailureReason)

	read, err := e.sc.Refunds.Get(rf.ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusFailed, read.Status)
	require.Equal(t, stripe.RefundFailureReasonExpiredOrCanceledCard, read.FailureReason)
	require.EqualValues(t, 0, charge(t, e, pi.ID).AmountRefunded)

	// The replay is the answer as given.
	replay, err := e.sc.Refunds.New(refundOf(pi.ID, 0, "rfail"))
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusSucceeded, replay.Status)
	require.Equal(t, "true", replay.LastResponse.Header.Get("Idempotent-Replayed"))
	snap := e.fake.Refunds()
	require.Len(t, snap, 1)
	require.Equal(t, stripefake.RefundFailed, snap[0].Status)
	require.EqualValues(t, 1, e.fake.Stats().RefundsFailed)
}

func TestSetRefundOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")

	require.NoError(t, e.fake.SetRefundOutcome(pi.ID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 100, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusPending, rf.Status)

	require.NoError(t, e.fake.SetRefundOutcome(pi.ID, stripefake.RefundOutcome{
		Status: stripefake.RefundFailed, FailureReason: "declined",
	}))
	rf, err = e.sc.Refunds.New(refundOf(pi.ID, 100, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusSucceeded, rf.Status)
	read, err := e.sc.Refunds.Get(rf.ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusFailed, read.Status)
	require.EqualValues(t, "declined", read.FailureReason)

	// The zero outcome restores the card's behaviour; earlier refunds keep
	// their status.
	require.NoError(t, e.fake.SetRefundOutcome(pi.ID, stripefake.RefundOutcome{}))
	rf, err = e.sc.Refunds.New(refundOf(pi.ID, 100, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusSucceeded, rf.Status)
	statuses := []string{}
	for _, r := range e.fake.Refunds() {
		statuses = append(statuses, r.Status)
	}
	require.Equal(t, []string{stripefake.RefundPending, stripefake.RefundFailed, stripefake.RefundSucceeded}, statuses)
	require.EqualValues(t, 200, charge(t, e, pi.ID).AmountRefunded)

	// An outcome also overrides the refund test cards.
	card := paid(t, e, "pm_card_pendingRefund")
	require.NoError(t, e.fake.SetRefundOutcome(card.ID, stripefake.RefundOutcome{Status: stripefake.RefundSucceeded}))
	rf, err = e.sc.Refunds.New(refundOf(card.ID, 0, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusSucceeded, rf.Status)

	require.ErrorIs(t, e.fake.SetRefundOutcome("pi_nope", stripefake.RefundOutcome{}), stripefake.ErrNoSuchPaymentIntent)
	for _, bad := range []stripefake.RefundOutcome{
		{Status: "canceled"},
		{Status: stripefake.RefundPending, FailureReason: "declined"},
		{Status: stripefake.RefundFailed, FailureReason: "bored"},
	} {
		require.Error(t, e.fake.SetRefundOutcome(pi.ID, bad), bad)
	}
	_, err = e.fake.SetRefundStatus("re_nope", stripefake.RefundFailed, "")
	require.ErrorIs(t, err, stripefake.ErrNoSuchRefund)
	_, err = e.fake.SetRefundStatus(rf.ID, stripefake.RefundSucceeded, "declined")
	require.Error(t, err)
	_, err = e.fake.SetRefundStatus(rf.ID, stripefake.RefundFailed, "bored")
	require.Error(t, err)
}

// Stripe documents that a succeeded refund can still fail later.
func TestRefundSucceededThenFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	pi := paid(t, e, "pm_card_visa")
	rf, err := e.sc.Refunds.New(refundOf(pi.ID, 0, ""))
	require.NoError(t, err)
	got, err := e.fake.SetRefundStatus(rf.ID, stripefake.RefundFailed, "")
	require.NoError(t, err)
	require.Equal(t, stripefake.RefundFailureExpiredOrCanceledCard, got.FailureReason)
	require.EqualValues(t, 0, e.fake.PaymentIntents()[0].AmountRefunded)
}
