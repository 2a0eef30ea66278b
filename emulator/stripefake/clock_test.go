package stripefake_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// Advance moves the server's clock on without sleeping: on the real clock
// (no Options.Now), a search lag of five minutes runs out, an idempotency
// key expires, and later objects are stamped five minutes later.
func TestAdvance(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{SearchLag: 5 * time.Minute, IdempotencyTTL: 10 * time.Minute})
	start := e.fake.Now()
	require.WithinDuration(t, time.Now(), start, time.Second)

	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "adv", "adv-key"))
	require.NoError(t, err)
	const q = "metadata['payment_id']:'adv'"
	require.Empty(t, search(t, e, q), "within the lag")

	e.fake.Advance(5 * time.Minute)
	require.WithinDuration(t, time.Now().Add(5*time.Minute), e.fake.Now(), time.Second)
	found := search(t, e, q)
	require.Len(t, found, 1, "the lag ran out")
	require.Equal(t, pi.ID, found[0].ID)

	later, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "adv2", ""))
	require.NoError(t, err)
	require.InDelta(t, pi.Created+300, later.Created, 2, "stamped by the advanced clock")
	got := list(t, e, &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{
		LesserThan: pi.Created + 60,
	}})
	require.Equal(t, []string{pi.ID}, got, "created filters compare with the advanced stamps")

	replay, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "adv", "adv-key"))
	require.NoError(t, err)
	require.Equal(t, pi.ID, replay.ID, "the key is 5 of its 10 minutes old")
	e.fake.Advance(5*time.Minute + time.Second)
	fresh, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "adv", "adv-key"))
	require.NoError(t, err)
	require.NotEqual(t, pi.ID, fresh.ID, "the key expired")

	require.Panics(t, func() { e.fake.Advance(-time.Second) })
}

// Advance adds to Options.Now rather than replacing it.
func TestAdvanceAddsToOptionsNow(t *testing.T) {
	t.Parallel()
	clock := newClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newEnv(t, stripefake.Options{Now: clock.Now})
	e.fake.Advance(time.Hour)
	clock.Add(time.Minute)
	require.Equal(t, time.Date(2030, 1, 1, 1, 1, 0, 0, time.UTC), e.fake.Now().UTC())
	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "x", ""))
	require.NoError(t, err)
	require.Equal(t, time.Date(2030, 1, 1, 1, 1, 0, 0, time.UTC).Unix(), pi.Created)
}

// Backdate moves one PaymentIntent's creation earlier: retrieve, list (its
// created filters and its newest-first order), the expanded charge and the
// search lag all see the earlier time, and the refunds of every
// PaymentIntent still reach the right one.
func TestBackdate(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := newClock(t0)
	e := newEnv(t, stripefake.Options{Now: clock.Now, SearchLag: 5 * time.Minute})

	var ids []string
	for _, pm := range []string{"pm_card_visa", "pm_card_pendingRefund", "pm_card_visa"} {
		ids = append(ids, paid(t, e, pm).ID)
	}
	rf, err := e.sc.Refunds.New(refundOf(ids[1], 1000, ""))
	require.NoError(t, err)
	require.Equal(t, stripe.RefundStatusPending, rf.Status)
	require.Equal(t, []string{ids[2], ids[1], ids[0]}, list(t, e, &stripe.PaymentIntentListParams{}))
	require.Empty(t, search(t, e, "currency:'usd'"))

	got, err := e.fake.Backdate(ids[2], 10*time.Minute)
	require.NoError(t, err)
	require.Equal(t, t0.Add(-10*time.Minute), got.Created)

	require.Equal(t, t0.Add(-10*time.Minute).Unix(), retrieved(t, e, ids[2]).Created)
	require.Equal(t, t0.Add(-10*time.Minute).Unix(), charge(t, e, ids[2]).Created)
	require.Equal(t, []string{ids[1], ids[0], ids[2]}, list(t, e, &stripe.PaymentIntentListParams{}),
		"newest first by created")
	older := list(t, e, &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{
		LesserThanOrEqual: t0.Add(-5 * time.Minute).Unix(),
	}})
	require.Equal(t, []string{ids[2]}, older)
	recent := list(t, e, &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThanOrEqual: t0.Unix(),
	}})
	require.Equal(t, []string{ids[1], ids[0]}, recent)
	page := list(t, e, &stripe.PaymentIntentListParams{ListParams: stripe.ListParams{
		StartingAfter: stripe.String(ids[0]),
	}})
	require.Equal(t, []string{ids[2]}, page, "cursors follow the new order")
	found := search(t, e, "currency:'usd'")
	require.Len(t, found, 1, "only the backdated one is past the lag")
	require.Equal(t, ids[2], found[0].ID)

	// The refund made before the Backdate still belongs to its PaymentIntent.
	_, err = e.fake.SetRefundStatus(rf.ID, stripefake.RefundFailed, "")
	require.NoError(t, err)
	require.EqualValues(t, 0, charge(t, e, ids[1]).AmountRefunded)
	full, err := e.sc.Refunds.New(refundOf(ids[2], 0, ""))
	require.NoError(t, err)
	require.EqualValues(t, 1234, full.Amount)
	require.EqualValues(t, 1234, charge(t, e, ids[2]).AmountRefunded)
	require.EqualValues(t, 0, charge(t, e, ids[0]).AmountRefunded)
	for _, pi := range e.fake.PaymentIntents() {
		if pi.ID == ids[2] {
			require.EqualValues(t, 1234, pi.AmountRefunded)
		}
	}

	_, err = e.fake.Backdate("pi_nope", time.Minute)
	require.True(t, errors.Is(err, stripefake.ErrNoSuchPaymentIntent), err)
	_, err = e.fake.Backdate(ids[0], -time.Minute)
	require.Error(t, err)
}
