package phases

import (
	"context"
	"errors"
	"fmt"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// HandOver parks key keyID for a conflict, in tx, whatever its state,
// because the remote party's word contradicts what the key answers or
// would answer: unlike Reopen, which only reopens a finished key. A
// finished key is reopened at point. An unfinished one keeps its recovery
// point and loses its lease: a run holding it fails its fence and writes
// nothing (as with FinishFromOutside), the completer does not take a
// parked key, and an event finds it the operator's (ClaimForEvent), so
// nothing finishes it as if the contradiction had not happened. A key
// that awaited an operator already (for another conflict, or an unknown
// outcome) is the operator's for this too: reason goes before its earlier
// one. It reports false when the key does not exist.
func (e *Engine) HandOver(ctx context.Context, tx db.Tx, keyID int64, point RecoveryPoint, reason string) (bool, error) {
	newlyParked, err := e.queries.IdempotencyKeyHandOver(ctx, tx, &dbsqlc.IdempotencyKeyHandOverParams{
		ID: keyID, Point: string(point), LastError: truncate(reason, maxErrorLen),
	})
	switch {
	case errors.Is(err, db.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("error handing idempotency key %d to an operator: %w", keyID, err)
	}
	if newlyParked {
		db.AfterCommit(ctx, e.cfg.Observer.NeedsAttention)
	}
	return true, nil
}
