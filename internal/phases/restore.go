package phases

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
)

// Reaped names a reaped key by what it made, as its tombstone keeps it:
// the event that contradicts its answer knows the payment or refund, never
// the client's key.
type Reaped struct {
	// ResourceType and ResourceID are what the key made ("payment", 7).
	ResourceType string
	ResourceID   int64
	// Method and, when not empty, Path are the request that made it: a
	// payment's create, not a capture that names the same payment.
	Method, Path string
	// Flow is the flow the key comes back to, and CreatedAt its creation
	// (the resource's: what an operator's lookup window starts from).
	Flow      string
	CreatedAt time.Time
}

// Restore is Reopen for a key the reaper already took: in tx, it brings
// the key back from its tombstone parked for an operator, at point, with
// reason, so that a retry answers 503 needs-attention instead of the
// tombstone's 422, and an operator can settle it. It returns the key's new
// id, or false when no tombstone is left (it outlived its retention): then
// nothing names the key any more. A *KeyInUseError means a live key holds
// the reaped key's (user, idempotency key): the key cannot come back under
// it, and its tombstone stays.
//
// The request's params went with the key: it comes back past its flow's
// first step, the only one that reads them, and a parked key is only ever
// settled (Settle), never run.
func (e *Engine) Restore(ctx context.Context, tx db.Tx, key Reaped, point RecoveryPoint, reason string) (int64, bool, error) {
	params := &dbsqlc.IdempotencyKeyRestoreFromTombstoneParams{
		Flow: key.Flow, Point: string(point), CreatedAt: key.CreatedAt, LastError: ptr(truncate(reason, maxErrorLen)),
		ResourceType: &key.ResourceType, ResourceID: &key.ResourceID, RequestMethod: key.Method,
	}
	if key.Path != "" {
		params.RequestPath = &key.Path
	}
	id, err := e.queries.IdempotencyKeyRestoreFromTombstone(ctx, tx, params)
	if errors.Is(err, db.ErrNotFound) {
		live, err := e.queries.IdempotencyKeyHoldingTombstone(ctx, tx, &dbsqlc.IdempotencyKeyHoldingTombstoneParams{
			ResourceType: params.ResourceType, ResourceID: params.ResourceID,
			RequestMethod: params.RequestMethod, RequestPath: params.RequestPath,
		})
		switch {
		case errors.Is(err, db.ErrNotFound):
			return 0, false, nil
		case err != nil:
			return 0, false, fmt.Errorf("error reading the key holding the reaped key of %s %d: %w", key.ResourceType, key.ResourceID, err)
		}
		return 0, false, &KeyInUseError{KeyID: live}
	}
	if err != nil {
		return 0, false, fmt.Errorf("error restoring the reaped key of %s %d: %w", key.ResourceType, key.ResourceID, err)
	}
	db.AfterCommit(ctx, e.cfg.Observer.NeedsAttention)
	return id, true, nil
}
