package phases

import (
	"bytes"
	"strconv"
	"time"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/ids"
)

// KeyExpiredError means the key was used before, its request finished, and
// the reaper has since deleted it: the stored answer is gone and only the
// key's tombstone is left. The request is refused, never run again, since
// running it again could charge a second time.
type KeyExpiredError struct {
	// ResponseCode is the status the original request was answered with.
	ResponseCode int
	// ResourceType names what the original request made, such as
	// "payment"; it is empty when the request made nothing.
	ResourceType string
	// ResourceID is the id the client saw of what the original request
	// made, with the prefix its tombstone keeps (pay_…, re_…), or the
	// number of one made before public ids; "" when it made nothing.
	ResourceID string
	// SameRequest is true when the refused request has the original's
	// fingerprint: a late retry, not the key reused for another request.
	SameRequest bool
	// FinishedAt is when the original request finished.
	FinishedAt time.Time
}

func (e *KeyExpiredError) Error() string {
	return "idempotency key expired: its request finished at " + e.FinishedAt.UTC().Format(time.RFC3339) + " and was reaped"
}

// keyExpired is the error for req's key, whose tombstone row found.
func keyExpired(req *Request, found *dbsqlc.IdempotencyKeyExistsRow) *KeyExpiredError {
	err := &KeyExpiredError{
		ResponseCode: int(*found.TombstoneResponseCode),
		SameRequest:  bytes.Equal(found.TombstoneFingerprint, req.Fingerprint),
	}
	if found.TombstoneResourceType != nil && found.TombstoneResourceID != nil {
		err.ResourceType, err.ResourceID = *found.TombstoneResourceType, strconv.FormatInt(*found.TombstoneResourceID, 10)
		// The tombstone keeps the prefix of the public id it names
		// (IdempotencyKeyReap writes both), so the engine needs to know
		// no resource type to give the id the client saw.
		if found.TombstoneResourcePublicID.Valid && found.TombstoneResourcePrefix != nil {
			err.ResourceID = ids.Format(*found.TombstoneResourcePrefix, found.TombstoneResourcePublicID.UUID)
		}
	}
	if found.TombstoneFinishedAt != nil {
		err.FinishedAt = *found.TombstoneFinishedAt
	}
	return err
}
