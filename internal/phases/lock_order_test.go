package phases_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases"
)

// keyLockedElsewhere reports whether another transaction holds key id's
// row lock, asked from a connection of its own without waiting.
func keyLockedElsewhere(ctx context.Context, b *bundle, id int64) (bool, error) {
	_, err := b.pool.Exec(ctx, `SELECT 1 FROM idempotency_keys WHERE id = $1 FOR UPDATE NOWAIT`, id)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "55P03" { // lock_not_available
		return true, nil
	}
	return false, err
}

// Lock order: a webhook locks the flow's row (a payment, a refund) and then
// the key (ClaimForEvent). Checkpoint and SettleAfter's first run what the
// flow locks before they lock the key, so they take the same order and
// neither can deadlock with a webhook. Defect: Checkpoint renewed the lease
// (an UPDATE of the key row) first, then ran fn; a capture moving to its
// next Stripe key locked the key, then the payment, while a webhook held
// the payment and waited for the key: Postgres broke the cycle with a
// deadlock error after deadlock_timeout.
func TestCheckpointAndSettleLockTheFlowsRowBeforeTheKey(t *testing.T) {
	t.Parallel()
	b := setup(t, phases.Config{})
	var lockedInCheckpoint []bool
	require.NoError(t, b.register(shipmentFlow(
		phases.Foreign(phases.Started, func(ctx context.Context, run *phases.Run, _ *shipment) (string, error) {
			err := run.Checkpoint(ctx, func(ctx context.Context, tx db.Tx) error {
				locked, err := keyLockedElsewhere(ctx, b, run.Key.ID)
				lockedInCheckpoint = append(lockedInCheckpoint, locked)
				return err
			})
			if err != nil {
				return "", err
			}
			return "", phases.NeedsAttention("parked for the settlement below")
		}, func(context.Context, db.Tx, *phases.Run, *shipment, string) (phases.Transition, error) {
			return phases.Next(), nil
		}),
		finish("shipped"),
	)))
	_, err := b.engine.Execute(context.Background(), b.request("k"))
	var parked *phases.NeedsAttentionError
	require.ErrorAs(t, err, &parked)
	require.Equal(t, []bool{false}, lockedInCheckpoint, "fn ran before the lease renewal locked the key")

	id := keyColumn[int64](t, b, "k", "id")
	var lockedInFirst bool
	_, err = b.engine.SettleAfter(context.Background(), id, func(ctx context.Context, tx db.Tx) error {
		lockedInFirst, err = keyLockedElsewhere(ctx, b, id)
		return err
	}, func(ctx context.Context, _ db.Tx, _ *dbsqlc.IdempotencyKey) (*phases.Response, error) {
		locked, err := keyLockedElsewhere(ctx, b, id)
		require.NoError(t, err)
		require.True(t, locked, "settle runs with the key locked")
		return &phases.Response{Status: 410, Body: []byte(`{}`)}, nil
	})
	require.NoError(t, err)
	require.False(t, lockedInFirst, "first ran before the key was locked")
}
