package payments

import (
	"context"
	"errors"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// AdmitRef refuses, before a key is reserved, a request about a payment that
// is not the caller's or does not exist: 404, not stored. Every endpoint
// that acts on a payment (refunds, captures, cancels) admits through it.
func AdmitRef(ctx context.Context, pool *db.Pool, userID int64, ref Ref) (*problem.Problem, error) {
	publicID, err := ref.Resolve(ctx, pool, userID)
	if err == nil {
		_, err = dbsqlc.New().PaymentGetByPublicIDForUser(ctx, pool,
			&dbsqlc.PaymentGetByPublicIDForUserParams{UserID: userID, PublicID: publicID})
	}
	switch {
	case errors.Is(err, db.ErrNotFound):
		return problem.New(problem.NotFound, "No such payment."), nil
	case err != nil:
		return nil, err
	}
	return nil, nil
}
