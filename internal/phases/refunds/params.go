package refunds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/jsonbody"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// Reasons are the refund reasons Stripe accepts.
var Reasons = []string{"duplicate", "fraudulent", "requested_by_customer"}

// Params is a validated refund request: the path's payment and the body.
//
// Its members are in RFC 8785's order (sorted by name), so that its encoding
// is already canonical unless a string needs an escape.
type Params struct {
	// Amount is nil for "all that is still refundable".
	Amount    *int64       `json:"amount,omitempty"`
	PaymentID payments.Ref `json:"payment_id"`
	Reason    *string      `json:"reason,omitempty"`
}

// Decode decodes a refund request for the API: the payment id from the path
// and the body, strictly, as canonical params (a null member is a member
// left out).
func Decode(body []byte, pathValue func(string) string) ([]byte, []problem.FieldError) {
	p, errs := DecodeParams(body, pathValue("id"))
	if errs != nil {
		return nil, errs
	}
	return p.Canonical(), nil
}

// Canonical is the request in RFC 8785 form, members sorted by name, a
// member left out or sent as null absent alike.
func (p *Params) Canonical() []byte {
	b := append(make([]byte, 0, 96), '{')
	if p.Amount != nil {
		b = strconv.AppendInt(append(b, `"amount":`...), *p.Amount, 10)
		b = append(b, ',')
	}
	ref, _ := p.PaymentID.MarshalJSON() // a number or an id of base32 digits: cannot fail
	b = append(append(b, `"payment_id":`...), ref...)
	if p.Reason != nil {
		b = idempotency.AppendString(append(b, `,"reason":`...), *p.Reason)
	}
	return append(b, '}')
}

// DecodeParams validates a refund request.
func DecodeParams(body []byte, paymentID string) (*Params, []problem.FieldError) {
	var p Params
	ref, err := payments.ParseRef(paymentID)
	if err != nil {
		return nil, []problem.FieldError{{Pointer: "", Detail: "the payment id in the path must be a payment's id (pay_…)"}}
	}
	p.PaymentID = ref
	o, errs := jsonbody.Parse(body, "amount", "reason")
	if errs != nil {
		return nil, errs
	}
	if n, ok := o.Int("amount", payments.MinAmount, payments.MaxAmount, false, " (minor units)"); ok {
		p.Amount = &n
	}
	if s, ok := o.String("reason", false, func(s string) bool { return slices.Contains(Reasons, s) },
		"must be one of duplicate, fraudulent, requested_by_customer"); ok {
		p.Reason = &s
	}
	if errs := o.Errors(); errs != nil {
		return nil, errs
	}
	return &p, nil
}

// AdmitRefund refuses, before its key is reserved, a refund of a payment that
// is not the caller's or does not exist: 404, not stored.
func AdmitRefund(pool *db.Pool) func(ctx context.Context, userID int64, params []byte) (*problem.Problem, error) {
	q := dbsqlc.New()
	return func(ctx context.Context, userID int64, params []byte) (*problem.Problem, error) {
		var p Params
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, fmt.Errorf("error decoding refund params: %w", err)
		}
		publicID, err := p.PaymentID.Resolve(ctx, pool, userID)
		if err == nil {
			_, err = q.PaymentGetByPublicIDForUser(ctx, pool, &dbsqlc.PaymentGetByPublicIDForUserParams{UserID: userID, PublicID: publicID})
		}
		switch {
		case errors.Is(err, db.ErrNotFound):
			return problem.New(problem.NotFound, "No such payment."), nil
		case err != nil:
			return nil, err
		}
		return nil, nil
	}
}
