package phases_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// A new key is inserted where its first transaction leaves it when its
// first local steps go on: one version of its row, no advance. Its steps
// still run from Started, and a run that resumes it after a crash finds
// their rows.
func TestANewKeyIsInsertedWhereItsFirstStepsLeaveIt(t *testing.T) {
	t.Parallel()
	errCrash := errors.New("crash")
	var crashed atomic.Bool
	b := setup(t, phases.Config{LeaseTimeout: time.Hour, Hooks: phases.Hooks{
		AfterCommit: func(_ context.Context, at phases.RecoveryPoint) error {
			if crashed.CompareAndSwap(false, true) {
				return errCrash // as if the process died right after the first commit
			}
			return nil
		}}})
	// The first step notes the point it sees the run at.
	first := phases.Local(phases.Started, func(ctx context.Context, tx db.Tx, run *phases.Run, _ *shipment) (phases.Transition, error) {
		_, err := tx.Exec(ctx, `INSERT INTO shipment_log VALUES ($1, 'slot', $2)`, run.Key.ID, string(run.RecoveryPoint()))
		return phases.Next(), err
	})
	require.NoError(t, b.register(shipmentFlow(
		first,
		logStep("slot_booked", "packed"),
		b.callStep("packed", "courier"),
		finish("shipped"),
	)))
	_, err := b.engine.Execute(context.Background(), b.request("k"))
	require.ErrorIs(t, err, errCrash)
	require.Equal(t, "packed", b.point(t, "k"))
	require.Equal(t, "(0,1)", keyColumn[string](t, b, "k", "ctid::text"), "the key's row was written once")
	require.True(t, keyColumn[bool](t, b, "k", "lock_token IS NOT NULL AND locked_at = last_run_at"), "leased by the dead run")
	require.Equal(t, []string{"slot", "packed"}, b.steps(t, "k"))
	require.Equal(t, string(phases.Started), keyColumn[string](t, b, "k",
		"(SELECT note FROM shipment_log WHERE step = 'slot')"), "the first step ran at started")
	require.Zero(t, b.courier.calls.Load())

	var id int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT id FROM idempotency_keys`).Scan(&id))
	res, err := b.later(2*time.Hour).Resume(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, 201, res.Response.Status)
	require.Equal(t, []string{"slot", "packed", "courier"}, b.steps(t, "k"), "resumed at the call")
	require.EqualValues(t, 1, b.courier.calls.Load())
	require.EqualValues(t, 1, b.commits.takeover.Load())
}

// A first step that finishes the key (a refusal) writes the answer over
// the row it was inserted with, in the same transaction; a first step that
// fails leaves no key at all.
func TestANewKeyEndsWhereItsFirstTransactionEnds(t *testing.T) {
	t.Parallel()
	errStep := errors.New("no slot")
	for name, tc := range map[string]struct {
		do   func(context.Context, db.Tx, *phases.Run, *shipment) (phases.Transition, error)
		want string // the key's point, or "" for no key
	}{
		"refused": {do: func(context.Context, db.Tx, *phases.Run, *shipment) (phases.Transition, error) {
			return phases.FinishWith(&phases.Response{Status: 409, Body: []byte(`{"full":true}`)}), nil
		}, want: string(phases.Finished)},
		"failed": {do: func(context.Context, db.Tx, *phases.Run, *shipment) (phases.Transition, error) {
			return phases.Transition{}, errStep
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, phases.Config{})
			require.NoError(t, b.register(shipmentFlow(
				phases.Local(phases.Started, tc.do),
				b.callStep("slot_booked", "courier"),
				finish("shipped"),
			)))
			res, err := b.engine.Execute(context.Background(), b.request("k"))
			if tc.want == "" {
				require.ErrorIs(t, err, errStep)
				var keys int
				require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys`).Scan(&keys))
				require.Zero(t, keys, "the key rolled back with its step")
				return
			}
			require.NoError(t, err)
			require.Equal(t, 409, res.Response.Status)
			require.Equal(t, tc.want, b.point(t, "k"))
			require.True(t, keyColumn[bool](t, b, "k", "lock_token IS NULL"))
			again, err := b.engine.Execute(context.Background(), b.request("k"))
			require.NoError(t, err)
			require.True(t, again.Replayed)
			require.Equal(t, res.Response.Body, again.Response.Body)
			require.Zero(t, b.courier.calls.Load())
		})
	}
}

// A flow whose first step is a call has no local step to share the key's
// insert: the key is inserted at started, as the call finds it.
func TestANewKeyWithACallFirstIsInsertedAtStarted(t *testing.T) {
	t.Parallel()
	errCrash := errors.New("crash")
	b := setup(t, phases.Config{LeaseTimeout: time.Hour, Hooks: phases.Hooks{
		AfterCall: func(context.Context, phases.RecoveryPoint) error { return errCrash }}})
	require.NoError(t, b.register(shipmentFlow(b.callStep(phases.Started, "courier"), finish("booked"))))
	_, err := b.engine.Execute(context.Background(), b.request("k"))
	require.ErrorIs(t, err, errCrash)
	require.Equal(t, string(phases.Started), b.point(t, "k"))
	require.Equal(t, "(0,1)", keyColumn[string](t, b, "k", "ctid::text"))
}
