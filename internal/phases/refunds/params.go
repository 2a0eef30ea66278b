package refunds

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/jsonbody"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// Reasons are the refund reasons Stripe accepts.
var Reasons = []string{"duplicate", "fraudulent", "requested_by_customer"}

// Params is a validated refund request: the path's payment and the body.
// Encoded with encoding/json, it is the params the key stores, a member
// sent as null left out like one not sent.
type Params struct {
	// Amount is nil for "all that is still refundable".
	Amount    *int64       `json:"amount,omitempty"`
	PaymentID payments.Ref `json:"payment_id"`
	Reason    *string      `json:"reason,omitempty"`
}

// Decode decodes a refund request for the API: the payment id from the path
// and the body, strictly, as params in JSON.
func Decode(body []byte, pathValue func(string) string) ([]byte, []problem.FieldError) {
	p, errs := DecodeParams(body, pathValue("id"))
	if errs != nil {
		return nil, errs
	}
	params, _ := json.Marshal(p) // integers, strings and a payments.Ref: it cannot fail
	return params, nil
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
	return func(ctx context.Context, userID int64, params []byte) (*problem.Problem, error) {
		var p Params
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, fmt.Errorf("error decoding refund params: %w", err)
		}
		return payments.AdmitRef(ctx, pool, userID, p.PaymentID)
	}
}
