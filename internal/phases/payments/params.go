package payments

import (
	"fmt"
	"strconv"

	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/jsonbody"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// Limits of a payment request.
const (
	MinAmount         = 1
	MaxAmount         = 99_999_999
	MaxDescriptionLen = 1000
	maxPaymentMethod  = 255
)

// Params is a validated payment request. Its members are in RFC 8785's
// order (sorted by name), so that its encoding is already canonical unless a
// string needs an escape, and the fingerprint need not parse it again.
type Params struct {
	Amount        int64   `json:"amount"`
	Currency      string  `json:"currency"`
	Description   *string `json:"description,omitempty"`
	PaymentMethod string  `json:"payment_method"`
}

// Canonical is the request as its fingerprint and its key row see it: only
// the members DecodeParams accepted, with an optional member that was sent
// as null left out, so that `"description": null` and no description are one
// request. It is written in RFC 8785 form, members sorted by name, as
// idempotency.Fingerprint would put it; the flow decodes the stored copy
// with encoding/json.
func (p *Params) Canonical() []byte {
	size := len(`{"amount":,"currency":"","payment_method":""}`) + 20 + len(p.Currency) + len(p.PaymentMethod)
	if p.Description != nil {
		size += len(`,"description":""`) + len(*p.Description) + 16 // room for a few escapes
	}
	b := strconv.AppendInt(append(make([]byte, 0, size), `{"amount":`...), p.Amount, 10)
	b = idempotency.AppendString(append(b, `,"currency":`...), p.Currency)
	if p.Description != nil {
		b = idempotency.AppendString(append(b, `,"description":`...), *p.Description)
	}
	b = idempotency.AppendString(append(b, `,"payment_method":`...), p.PaymentMethod)
	return append(b, '}')
}

// isPaymentMethod admits Stripe PaymentMethod ids only (`^pm_[A-Za-z0-9_]+$`,
// at most maxPaymentMethod bytes). The prefix keeps a card number typed into
// the field from ever being stored.
func isPaymentMethod(s string) bool {
	if len(s) <= len("pm_") || len(s) > maxPaymentMethod || s[:3] != "pm_" {
		return false
	}
	for i := 3; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

var (
	isDescription        = jsonbody.FreeText(MaxDescriptionLen)
	invalidPaymentMethod = fmt.Sprintf("must be a Stripe PaymentMethod id (pm_…) of at most %d letters, digits and underscores", maxPaymentMethod)
	invalidDescription   = fmt.Sprintf("must be at most %d characters without control characters", MaxDescriptionLen)
)

// Decode decodes a payment request for the API: its canonical params, or
// what is wrong with the body. A payment has no path values.
func Decode(body []byte, _ func(string) string) ([]byte, []problem.FieldError) {
	p, errs := DecodeParams(body)
	if errs != nil {
		return nil, errs
	}
	return p.Canonical(), nil
}

// DecodeParams decodes and validates a payment request body strictly (see
// package jsonbody), answering every problem it finds, each pointing at its
// member.
func DecodeParams(body []byte) (*Params, []problem.FieldError) {
	o, errs := jsonbody.Parse(body, "amount", "currency", "payment_method", "description")
	if errs != nil {
		return nil, errs
	}
	var p Params
	p.Amount, _ = o.Int("amount", MinAmount, MaxAmount, true, " (minor units)")
	p.Currency, _ = o.String("currency", true, isCurrency, "must be a lowercase ISO 4217 currency code, such as usd")
	p.PaymentMethod, _ = o.String("payment_method", true, isPaymentMethod, invalidPaymentMethod)
	if s, ok := o.String("description", false, isDescription, invalidDescription); ok {
		p.Description = &s
	}
	if errs := o.Errors(); errs != nil {
		return nil, errs
	}
	return &p, nil
}
