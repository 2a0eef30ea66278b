package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/ids"
)

// Ref names a payment as a client does: by its public id (pay_…), or, for
// a payment made before public ids, by the number its stored answers show.
type Ref struct {
	// Public is the payment's public id, unless Legacy is set.
	Public uuid.UUID
	// Legacy is the number of a payment made before public ids, or 0.
	Legacy int64
}

// ParseRef reads a payment's id as a path holds it.
func ParseRef(s string) (Ref, error) {
	if public, err := ids.Parse(ids.Payment, s); err == nil {
		return Ref{Public: public}, nil
	}
	if n, ok := ids.ParseNumber(s); ok {
		return Ref{Legacy: n}, nil
	}
	return Ref{}, errors.New("not a payment id")
}

// MarshalJSON writes the reference as the request params store it: a
// legacy number as a number, as keys made before public ids stored it, and
// a public id as its string.
func (r Ref) MarshalJSON() ([]byte, error) {
	if r.Legacy != 0 {
		return strconv.AppendInt(nil, r.Legacy, 10), nil
	}
	return json.Marshal(ids.Format(ids.Payment, r.Public))
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Ref) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		public, err := ids.Parse(ids.Payment, s)
		*r = Ref{Public: public}
		return err
	}
	n, ok := ids.ParseNumber(string(b))
	if !ok {
		return fmt.Errorf("not a payment id: %s", b)
	}
	*r = Ref{Legacy: n}
	return nil
}

// Resolve returns the public id of the user's payment r names, or
// db.ErrNotFound (also for another user's payment).
func (r Ref) Resolve(ctx context.Context, dbtx dbsqlc.DBTX, userID int64) (uuid.UUID, error) {
	if r.Legacy == 0 {
		return r.Public, nil
	}
	public, err := dbsqlc.New().PaymentPublicIDByLegacyID(ctx, dbtx, &dbsqlc.PaymentPublicIDByLegacyIDParams{
		UserID: userID, LegacyID: &r.Legacy,
	})
	return public, err
}

// ID is the public id of payment p.
func ID(p *dbsqlc.Payment) string { return ids.Format(ids.Payment, p.PublicID) }
