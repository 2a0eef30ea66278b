package captures

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/jsonbody"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// Params is a validated capture or cancel request: the path's payment, and
// for a capture the amount to capture. Encoded with encoding/json, it is
// the params the key stores.
type Params struct {
	// AmountToCapture is nil for "the whole authorization"; a cancel has
	// none.
	AmountToCapture *int64       `json:"amount_to_capture,omitempty"`
	PaymentID       payments.Ref `json:"payment_id"`
}

// DecodeCapture decodes a capture request for the API: the payment id from
// the path and the body ({"amount_to_capture": N}, optional), strictly.
func DecodeCapture(body []byte, pathValue func(string) string) ([]byte, []problem.FieldError) {
	return decode(body, pathValue("id"), "amount_to_capture")
}

// DecodeCancel decodes a cancel request: the payment id from the path and
// an empty object.
func DecodeCancel(body []byte, pathValue func(string) string) ([]byte, []problem.FieldError) {
	return decode(body, pathValue("id"))
}

// decode validates a request whose body may hold the members known.
func decode(body []byte, paymentID string, known ...string) ([]byte, []problem.FieldError) {
	var p Params
	ref, err := payments.ParseRef(paymentID)
	if err != nil {
		return nil, []problem.FieldError{{Pointer: "", Detail: "the payment id in the path must be a payment's id (pay_…)"}}
	}
	p.PaymentID = ref
	o, errs := jsonbody.Parse(body, known...)
	if errs != nil {
		return nil, errs
	}
	if len(known) > 0 {
		if n, ok := o.Int("amount_to_capture", payments.MinAmount, payments.MaxAmount, false, " (minor units)"); ok {
			p.AmountToCapture = &n
		}
	}
	if errs := o.Errors(); errs != nil {
		return nil, errs
	}
	params, _ := json.Marshal(p) // an integer and a payments.Ref: it cannot fail
	return params, nil
}

// Admit refuses, before its key is reserved, a capture or cancel of a
// payment that is not the caller's or does not exist: 404, not stored.
func Admit(pool *db.Pool) func(ctx context.Context, userID int64, params []byte) (*problem.Problem, error) {
	return func(ctx context.Context, userID int64, params []byte) (*problem.Problem, error) {
		var p Params
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, fmt.Errorf("error decoding capture params: %w", err)
		}
		return payments.AdmitRef(ctx, pool, userID, p.PaymentID)
	}
}
