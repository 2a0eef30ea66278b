package phases_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// handOver hands key k of b to an operator, as an event settler does.
func (b *bundle) handOver(t *testing.T, key, reason string) {
	t.Helper()
	id := keyColumn[int64](t, b, key, "id")
	require.NoError(t, db.WithTx(context.Background(), b.pool, func(ctx context.Context, tx db.Tx) error {
		found, err := b.engine.HandOver(ctx, tx, id, "reopened", reason)
		require.True(t, found)
		return err
	}))
}

// TestHandOverParksAKeyWhateverItsState: an event that contradicts what a
// key answers, or would answer, parks it for a conflict whether it is
// finished, held by a run, or parked for another reason; none of them
// then finishes it as if the event had not come.
func TestHandOverParksAKeyWhateverItsState(t *testing.T) {
	t.Parallel()

	t.Run("Finished", func(t *testing.T) {
		t.Parallel()
		b := setup(t, phases.Config{})
		require.NoError(t, b.register(shipmentFlow(finish(phases.Started))))
		_, err := b.engine.Execute(context.Background(), b.request("k"))
		require.NoError(t, err)

		b.handOver(t, "k", "the parcel came back")
		require.Equal(t, "reopened", b.point(t, "k"))
		require.Equal(t, "conflict", keyColumn[string](t, b, "k", "needs_attention_kind"))
		_, err = b.engine.Execute(context.Background(), b.request("k"))
		var parked *phases.NeedsAttentionError
		require.ErrorAs(t, err, &parked)
		require.True(t, parked.Conflict)
		require.EqualValues(t, 1, b.commits.parked.Load())

		require.NoError(t, db.WithTx(context.Background(), b.pool, func(ctx context.Context, tx db.Tx) error {
			found, err := b.engine.HandOver(ctx, tx, 1<<40, "reopened", "no such key")
			require.False(t, found)
			return err
		}))
	})

	// A run holds the key, its call made: the hand-over takes its lease,
	// and its record, fenced, writes nothing.
	t.Run("Leased", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		called := make(chan struct{})
		b := setup(t, phases.Config{LeaseTimeout: time.Hour, Hooks: phases.Hooks{
			AfterCall: func(context.Context, phases.RecoveryPoint) error {
				close(called)
				<-release
				return nil
			}}})
		require.NoError(t, b.register(shipmentFlow(b.callStep(phases.Started, "courier"), finish("booked"))))
		done := make(chan error, 1)
		go func() {
			_, err := b.engine.Execute(context.Background(), b.request("k"))
			done <- err
		}()
		select {
		case <-called:
		case <-time.After(5 * time.Second):
			t.Fatal("the call was not made")
		}

		b.handOver(t, "k", "the parcel came back")
		close(release)
		require.ErrorIs(t, <-done, phases.ErrLeaseLost)
		require.Empty(t, b.steps(t, "k"), "the run recorded nothing after it lost its lease")
		require.Equal(t, string(phases.Started), b.point(t, "k"), "an unfinished key keeps its point")
		require.Equal(t, "conflict", keyColumn[string](t, b, "k", "needs_attention_kind"))
		require.Equal(t, "the parcel came back", keyColumn[string](t, b, "k", "last_error"))
		_, err := b.engine.Execute(context.Background(), b.request("k"))
		var parked *phases.NeedsAttentionError
		require.ErrorAs(t, err, &parked, "no run takes it again")
		require.True(t, parked.Conflict)
		require.EqualValues(t, 1, b.commits.parked.Load())
	})

	// The key awaits an operator for an unknown outcome, which the remote
	// party's word could settle: now only the operator does, told both.
	t.Run("Parked", func(t *testing.T) {
		t.Parallel()
		b := setup(t, phases.Config{})
		require.NoError(t, b.register(shipmentFlow(
			phases.Foreign(phases.Started, func(context.Context, *phases.Run, *shipment) (string, error) {
				return "", phases.NeedsAttention("the courier lost the parcel")
			}, func(context.Context, db.Tx, *phases.Run, *shipment, string) (phases.Transition, error) {
				return phases.Next(), nil
			}),
			finish("shipped"),
		)))
		_, err := b.engine.Execute(context.Background(), b.request("k"))
		var parked *phases.NeedsAttentionError
		require.ErrorAs(t, err, &parked)
		require.False(t, parked.Conflict)

		b.handOver(t, "k", "the parcel came back")
		require.Equal(t, "conflict", keyColumn[string](t, b, "k", "needs_attention_kind"))
		require.Equal(t, "the parcel came back | parked before: the courier lost the parcel", keyColumn[string](t, b, "k", "last_error"))
		require.Equal(t, string(phases.Started), b.point(t, "k"))
		require.EqualValues(t, 1, b.commits.parked.Load(), "parked once")
		id := keyColumn[int64](t, b, "k", "id")
		require.Error(t, db.WithTx(context.Background(), b.pool, func(ctx context.Context, tx db.Tx) error {
			return b.engine.ClaimForEvent(ctx, tx, id)
		}), "an event does not settle it")
	})
}
