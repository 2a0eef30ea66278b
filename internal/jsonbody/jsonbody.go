// Package jsonbody decodes request bodies strictly, as every endpoint must:
// one JSON object, each member at most once, no unknown members, valid
// UTF-8 without unpaired surrogate escapes, nothing after the object; and it
// answers every problem it finds, each pointing at its member.
//
// It reads the body with encoding/json's Decoder, member by member, rather
// than decoding it into a struct with DisallowUnknownFields: that would
// match "Amount" to amount (encoding/json ignores case), keep the last of
// two members of one name silently, accept a body that is null, and stop
// at the first unknown member or wrong type instead of naming them all.
package jsonbody

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/paymentsd/paymentsd/internal/problem"
)

// Object is a body read into its members, with the problems found so far.
type Object struct {
	members map[string]json.RawMessage
	errs    []problem.FieldError
}

// maxUnknown is the number of unknown members an answer names one by one:
// a body of a hundred thousand of them gets a short answer, not one five
// times its size.
const maxUnknown = 20

// Parse reads body into its members, refusing a member not in known. A nil
// Object comes with the problem that stopped it.
func Parse(body []byte, known ...string) (*Object, []problem.FieldError) {
	if !utf8.Valid(body) { // encoding/json would read it as U+FFFD silently
		return nil, []problem.FieldError{{Pointer: "", Detail: "body is not valid UTF-8"}}
	}
	names, members, err := readObject(body)
	if err != nil {
		return nil, []problem.FieldError{{Pointer: "", Detail: err.Error()}}
	}
	o := &Object{members: members}
	unknown := 0
	for _, name := range names {
		if slices.Contains(known, name) {
			continue
		}
		if unknown++; unknown <= maxUnknown {
			o.Fail(name, "unknown member")
		}
	}
	if unknown > maxUnknown {
		o.errs = append(o.errs, problem.FieldError{Pointer: "", Detail: fmt.Sprintf("%d more unknown members", unknown-maxUnknown)})
	}
	return o, nil
}

// readObject reads a JSON object's members, their names in the order
// written, refusing anything but a single object and any member named twice.
func readObject(body []byte) ([]string, map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("body must be a JSON object")
	}
	var names []string
	members := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, errors.New("body is not valid JSON")
		}
		name := tok.(string) // inside an object, the decoder yields names here
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, errors.New("body is not valid JSON")
		}
		if _, dup := members[name]; dup {
			return nil, nil, fmt.Errorf("member %q appears more than once", name)
		}
		names = append(names, name)
		members[name] = raw
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, errors.New("body is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, errors.New("body must hold a single JSON object")
	}
	return names, members, nil
}

// Fail records a problem with member name.
func (o *Object) Fail(name, detail string) {
	o.errs = append(o.errs, problem.FieldError{Pointer: "/" + escapePointer(name), Detail: detail})
}

// Errors is every problem found, ordered by pointer so an answer does not
// depend on the order of the members; nil when there is none.
func (o *Object) Errors() []problem.FieldError {
	if len(o.errs) == 0 {
		return nil
	}
	slices.SortFunc(o.errs, func(a, b problem.FieldError) int { return strings.Compare(a.Pointer, b.Pointer) })
	return o.errs
}

// present is member name's JSON text, and whether it is there and not
// null: a null optional member is a member left out.
func (o *Object) present(name string, required bool) (json.RawMessage, bool) {
	raw, ok := o.members[name]
	if !ok || string(raw) == "null" {
		if required {
			o.Fail(name, "is required")
		}
		return nil, false
	}
	return raw, true
}

// Int reads member name as an integer from min to max, written as one:
// 2e3 and 2000.0 are refused. A missing (or null) member is a problem when
// required; ok says whether a value was read.
func (o *Object) Int(name string, min, max int64, required bool, unit string) (n int64, ok bool) {
	raw, ok := o.present(name, required)
	if !ok {
		return 0, false
	}
	if err := json.Unmarshal(raw, &n); err != nil || n < min || n > max {
		o.Fail(name, fmt.Sprintf("must be an integer from %d to %d%s", min, max, unit))
		return 0, false
	}
	return n, true
}

// String reads member name as a string that valid accepts (nil accepts any),
// failing with invalid otherwise. A missing (or null) member is a problem
// when required; ok says whether a value was read.
func (o *Object) String(name string, required bool, valid func(string) bool, invalid string) (s string, ok bool) {
	raw, ok := o.present(name, required)
	if !ok {
		return "", false
	}
	switch err := json.Unmarshal(raw, &s); {
	case err != nil:
		o.Fail(name, "must be a string")
	case strings.ContainsRune(s, 0):
		o.Fail(name, "must not contain NUL characters")
	case hasLoneSurrogate(raw):
		// encoding/json decodes an unpaired surrogate escape to U+FFFD, but
		// RFC 8785 refuses it, so the fingerprint would refuse the request.
		o.Fail(name, `must not contain an unpaired UTF-16 surrogate escape (\ud800 to \udfff)`)
	case valid != nil && !valid(s):
		o.Fail(name, invalid)
	default:
		return s, true
	}
	return "", false
}

// FreeText accepts at most max characters without control characters other
// than tabs and line breaks.
func FreeText(max int) func(string) bool {
	return func(s string) bool {
		return utf8.RuneCountInString(s) <= max && strings.IndexFunc(s, isForbiddenControl) < 0
	}
}

// isForbiddenControl allows tabs and line breaks in free text, nothing else
// below the printable range.
func isForbiddenControl(r rune) bool {
	return unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r'
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
			if low := unit(i + 6); low < 0xdc00 || low > 0xdfff {
				return true
			}
			i += 6
		}
		i += 5
	}
	return false
}

// escapePointer escapes a member name as a JSON Pointer reference token.
func escapePointer(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}
