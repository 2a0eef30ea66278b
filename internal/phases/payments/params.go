package payments

import (
	"encoding/json"
	"fmt"

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

// Params is a validated payment request, and, encoded with encoding/json,
// the params its key stores: only the members DecodeParams accepted, a
// description sent as null left out like one not sent, so that the two are
// one request.
type Params struct {
	Amount        int64   `json:"amount"`
	Currency      string  `json:"currency"`
	Description   *string `json:"description,omitempty"`
	PaymentMethod string  `json:"payment_method"`
	// CaptureMethod is CaptureManual or empty: "automatic" is the default,
	// stored like a request that left it out, so that the two are one
	// request and keys made before manual capture existed keep their
	// fingerprints.
	CaptureMethod string `json:"capture_method,omitempty"`
}

// Capture methods, Stripe's: automatic charges at once; manual only
// authorizes, and a capture (or a cancel) follows.
const (
	CaptureAutomatic = "automatic"
	CaptureManual    = "manual"
)

// Method is the payment's capture method as stored on its row.
func (p *Params) Method() string {
	if p.CaptureMethod == CaptureManual {
		return CaptureManual
	}
	return CaptureAutomatic
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

// Decode decodes a payment request for the API: its params as JSON, or
// what is wrong with the body. A payment has no path values.
func Decode(body []byte, _ func(string) string) ([]byte, []problem.FieldError) {
	p, errs := DecodeParams(body)
	if errs != nil {
		return nil, errs
	}
	params, _ := json.Marshal(p) // integers and strings: it cannot fail
	return params, nil
}

// DecodeParams decodes and validates a payment request body strictly (see
// package jsonbody), answering every problem it finds, each pointing at its
// member.
func DecodeParams(body []byte) (*Params, []problem.FieldError) {
	o, errs := jsonbody.Parse(body, "amount", "currency", "payment_method", "description", "capture_method")
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
	if s, ok := o.String("capture_method", false, func(s string) bool { return s == CaptureAutomatic || s == CaptureManual },
		"must be automatic or manual"); ok && s == CaptureManual {
		p.CaptureMethod = s
	}
	if errs := o.Errors(); errs != nil {
		return nil, errs
	}
	return &p, nil
}
