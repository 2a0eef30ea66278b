package payments

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/paymentsd/paymentsd/internal/problem"
)

// Limits of a payment request.
const (
	MinAmount         = 1
	MaxAmount         = 99_999_999
	MaxDescriptionLen = 1000
	maxPaymentMethod  = 255
)

// Params is a validated payment request.
type Params struct {
	Amount        int64   `json:"amount"`
	Currency      string  `json:"currency"`
	PaymentMethod string  `json:"payment_method"`
	Description   *string `json:"description,omitempty"`
}

// Canonical is the request as its fingerprint and its key row see it: only
// the members DecodeParams accepted, with an optional member that was sent
// as null left out, so that `"description": null` and no description are one
// request. idempotency.Fingerprint puts it into RFC 8785 form; the flow
// decodes the stored copy with encoding/json.
func (p *Params) Canonical() []byte {
	b, _ := json.Marshal(p) // integers and valid UTF-8 strings: it cannot fail
	return b
}

// paymentMethodPattern admits Stripe PaymentMethod ids only. The prefix
// keeps a card number typed into the field from ever being stored.
var paymentMethodPattern = regexp.MustCompile(`^pm_[A-Za-z0-9_]+$`)

// Decode decodes a payment request for the API: its canonical params, or
// what is wrong with the body. A payment has no path values.
func Decode(body []byte, _ func(string) string) ([]byte, []problem.FieldError) {
	p, errs := DecodeParams(body)
	if errs != nil {
		return nil, errs
	}
	return p.Canonical(), nil
}

// DecodeParams decodes and validates a payment request body strictly: one
// JSON object, each known member at most once and of the right type, no
// unknown members, valid UTF-8, nothing after the object. It answers every
// problem it finds, each pointing at its member.
func DecodeParams(body []byte) (*Params, []problem.FieldError) {
	if !utf8.Valid(body) {
		return nil, []problem.FieldError{{Pointer: "", Detail: "body is not valid UTF-8"}}
	}
	members, err := objectMembers(body)
	if err != nil {
		return nil, []problem.FieldError{{Pointer: "", Detail: err.Error()}}
	}

	var (
		p    Params
		errs []problem.FieldError
	)
	fail := func(name, detail string) {
		errs = append(errs, problem.FieldError{Pointer: "/" + name, Detail: detail})
	}
	for name := range members {
		switch name {
		case "amount", "currency", "payment_method", "description":
		default:
			fail(escapePointer(name), "unknown member")
		}
	}

	if raw, ok := members["amount"]; !ok {
		fail("amount", "is required")
	} else if n, err := strconv.ParseInt(string(raw), 10, 64); err != nil || n < MinAmount || n > MaxAmount {
		fail("amount", fmt.Sprintf("must be an integer from %d to %d (minor units)", MinAmount, MaxAmount))
	} else {
		p.Amount = n
	}

	if s, ok, err := stringMember(members, "currency"); err != nil || !ok {
		fail("currency", orRequired(ok, stringDetail(err, "must be a string")))
	} else if !isCurrency(s) {
		fail("currency", "must be a lowercase ISO 4217 currency code, such as usd")
	} else {
		p.Currency = s
	}

	if s, ok, err := stringMember(members, "payment_method"); err != nil || !ok {
		fail("payment_method", orRequired(ok, stringDetail(err, "must be a string")))
	} else if len(s) == 0 || len(s) > maxPaymentMethod || !paymentMethodPattern.MatchString(s) {
		fail("payment_method", fmt.Sprintf("must be a Stripe PaymentMethod id (pm_…) of at most %d letters, digits and underscores", maxPaymentMethod))
	} else {
		p.PaymentMethod = s
	}

	if raw, present := members["description"]; present && string(raw) != "null" {
		if s, _, err := stringMember(members, "description"); err != nil {
			fail("description", stringDetail(err, "must be a string or null"))
		} else if utf8.RuneCountInString(s) > MaxDescriptionLen || strings.IndexFunc(s, isForbiddenControl) >= 0 {
			fail("description", fmt.Sprintf("must be at most %d characters without control characters", MaxDescriptionLen))
		} else {
			p.Description = &s
		}
	}

	if len(errs) > 0 {
		sortFieldErrors(errs)
		return nil, errs
	}
	return &p, nil
}

// objectMembers splits a JSON object into its members, refusing anything
// but a single object and any member named twice (encoding/json would keep
// the last one silently, so two parsers could disagree on the request).
func objectMembers(body []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, errors.New("body must be a JSON object")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("body must be a JSON object")
	}
	members := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, errors.New("body is not valid JSON")
		}
		name := tok.(string) // inside an object, the decoder yields names here
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, errors.New("body is not valid JSON")
		}
		if _, dup := members[name]; dup {
			return nil, fmt.Errorf("member %q appears more than once", name)
		}
		members[name] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, errors.New("body is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("body must hold a single JSON object")
	}
	return members, nil
}

// errNotString is stringMember's answer for a member that is not a string.
var errNotString = errors.New("not a string")

// stringMember reads member name as a JSON string: ok is false when absent.
// Its other errors are details a client can read.
func stringMember(members map[string]json.RawMessage, name string) (s string, ok bool, err error) {
	raw, ok := members[name]
	if !ok {
		return "", false, nil
	}
	if len(raw) == 0 || raw[0] != '"' {
		return "", true, errNotString
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", true, errNotString
	}
	if strings.ContainsRune(s, 0) {
		return "", true, errors.New("must not contain NUL characters")
	}
	// encoding/json decodes an unpaired surrogate escape to U+FFFD, but
	// RFC 8785 refuses it, so Fingerprint would refuse a body this accepted.
	if hasLoneSurrogate(raw) {
		return "", true, errors.New(`must not contain an unpaired UTF-16 surrogate escape (\ud800 to \udfff)`)
	}
	return s, true, nil
}

// stringDetail is the detail for an error of stringMember: notString when
// the member is not a string, else the error's own detail.
func stringDetail(err error, notString string) string {
	if err == nil || errors.Is(err, errNotString) {
		return notString
	}
	return err.Error()
}

// hasLoneSurrogate reports whether raw, a valid JSON string literal, escapes
// a UTF-16 surrogate code unit that is not part of a high-low pair.
func hasLoneSurrogate(raw []byte) bool {
	unit := func(i int) rune { // the \uXXXX escape at raw[i:], or -1
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return -1
		}
		n, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		if err != nil {
			return -1
		}
		return rune(n)
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r := unit(i)
		if r < 0 { // another escape: skip its second character
			i++
			continue
		}
		if utf16.IsSurrogate(r) {
			if r >= 0xdc00 { // a low surrogate first
				return true
			}
			low := unit(i + 6)
			if low < 0xdc00 || low > 0xdfff {
				return true
			}
			i += 6
		}
		i += 5
	}
	return false
}

func orRequired(present bool, detail string) string {
	if !present {
		return "is required"
	}
	return detail
}

// isForbiddenControl allows tabs and line breaks in free text, nothing else
// below the printable range.
func isForbiddenControl(r rune) bool {
	return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r'
}

// escapePointer escapes a member name as a JSON Pointer reference token.
func escapePointer(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}

// sortFieldErrors orders errors by pointer, so a response does not depend on
// map iteration order.
func sortFieldErrors(errs []problem.FieldError) {
	slices.SortFunc(errs, func(a, b problem.FieldError) int { return strings.Compare(a.Pointer, b.Pointer) })
}
