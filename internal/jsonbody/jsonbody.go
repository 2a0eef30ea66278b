// Package jsonbody decodes request bodies strictly, as every endpoint must:
// one JSON object, each member at most once, no unknown members, valid
// UTF-8 without unpaired surrogate escapes, nothing after the object; and it
// answers every problem it finds, each pointing at its member.
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

// Object is a body split into its members, with the problems found so far.
// A member's name and its JSON text are slices of one copy of the body, so
// splitting it and reading strings from it costs no allocation per member,
// and the first members are listed in the Object itself.
type Object struct {
	members members
	inline  [4]member
	errs    []problem.FieldError
}

// maxUnknown is the number of unknown members an answer names one by one:
// a body of a hundred thousand of them gets a short answer, not one five
// times its size.
const maxUnknown = 20

// Parse splits body into members, refusing a member not in known. A nil
// Object comes with the problem that stopped it.
func Parse(body []byte, known ...string) (*Object, []problem.FieldError) {
	if !utf8.Valid(body) {
		return nil, []problem.FieldError{{Pointer: "", Detail: "body is not valid UTF-8"}}
	}
	o := &Object{}
	o.members.list = o.inline[:0]
	if err := objectMembers(body, &o.members); err != nil {
		return nil, []problem.FieldError{{Pointer: "", Detail: err.Error()}}
	}
	unknown := 0
	for _, m := range o.members.list {
		if slices.Contains(known, m.name) {
			continue
		}
		if unknown++; unknown <= maxUnknown {
			o.errs = append(o.errs, problem.FieldError{Pointer: "/" + escapePointer(m.name), Detail: "unknown member"})
		}
	}
	if unknown > maxUnknown {
		o.errs = append(o.errs, problem.FieldError{Pointer: "", Detail: fmt.Sprintf("%d more unknown members", unknown-maxUnknown)})
	}
	return o, nil
}

// Fail records a problem with member name.
func (o *Object) Fail(name, detail string) {
	o.errs = append(o.errs, problem.FieldError{Pointer: "/" + escapePointer(name), Detail: detail})
}

// Errors is every problem found, ordered by pointer so an answer does not
// depend on map order; nil when there is none.
func (o *Object) Errors() []problem.FieldError {
	if len(o.errs) == 0 {
		return nil
	}
	sortFieldErrors(o.errs)
	return o.errs
}

// Has reports whether member name is present and not null.
func (o *Object) Has(name string) bool {
	raw, ok := o.members.get(name)
	return ok && raw != "null"
}

// Int reads member name as an integer from min to max. A missing (or null)
// member is a problem when required; ok says whether a value was read.
func (o *Object) Int(name string, min, max int64, required bool, unit string) (n int64, ok bool) {
	if !o.Has(name) {
		if required {
			o.Fail(name, "is required")
		}
		return 0, false
	}
	raw, _ := o.members.get(name)
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < min || n > max {
		o.Fail(name, fmt.Sprintf("must be an integer from %d to %d%s", min, max, unit))
		return 0, false
	}
	return n, true
}

// String reads member name as a string that valid accepts (nil accepts any),
// failing with invalid otherwise. A missing (or null) member is a problem
// when required; ok says whether a value was read.
func (o *Object) String(name string, required bool, valid func(string) bool, invalid string) (s string, ok bool) {
	if !o.Has(name) {
		if required {
			o.Fail(name, "is required")
		}
		return "", false
	}
	s, _, err := stringMember(&o.members, name)
	switch {
	case err != nil:
		o.Fail(name, stringDetail(err, "must be a string"))
		return "", false
	case valid != nil && !valid(s):
		o.Fail(name, invalid)
		return "", false
	}
	return s, true
}

// FreeText accepts at most max characters without control characters other
// than tabs and line breaks.
func FreeText(max int) func(string) bool {
	return func(s string) bool {
		return utf8.RuneCountInString(s) <= max && strings.IndexFunc(s, isForbiddenControl) < 0
	}
}

// objectMembers splits a JSON object into its members, refusing anything
// but a single object and any member named twice (encoding/json would keep
// the last one silently, so two parsers could disagree on the request).
//
// Most bodies are an object of scalar members, which splitFlat reads and
// checks in one pass; most others are valid JSON objects whose member names
// need no unescaping, which splitObject reads once encoding/json has
// checked them. Neither allocates per member. Anything else goes to the
// token-by-token reading, which says what is wrong. Each adds the members to
// m, which must be empty, and leaves it empty when it gives up.
func objectMembers(body []byte, m *members) error {
	for _, split := range [...]func([]byte, *members) bool{splitFlat, splitObject} {
		if split(body, m) {
			return nil
		}
		m.list, m.index = m.list[:0], nil
	}
	return readMembers(body, m)
}

// splitObject splits body when it is valid JSON, an object, whose member
// names have no escapes and appear once each; ok is false otherwise.
func splitObject(b []byte, m *members) bool {
	if !json.Valid(b) {
		return false
	}
	body := string(b) // one copy, which every name and value slices
	i := skipSpace(body, 0)
	if body[i] != '{' {
		return false
	}
	if i = skipSpace(body, i+1); body[i] == '}' {
		return true
	}
	for {
		end := valueEnd(body, i) // body[i] opens the member's name
		name := body[i+1 : end-1]
		if strings.IndexByte(name, '\\') >= 0 {
			return false
		}
		start := skipSpace(body, skipSpace(body, end)+1) // past the colon
		end = valueEnd(body, start)
		if !m.add(name, body[start:end]) {
			return false // named twice
		}
		if i = skipSpace(body, end); body[i] == '}' {
			return true
		}
		i = skipSpace(body, i+1) // past the comma
	}
}

// skipSpace is the index of the first byte at or after i that is not JSON
// white space.
func skipSpace(b string, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// valueEnd is the index just past the value that starts at b[i], in a body
// json.Valid accepted.
func valueEnd(b string, i int) int {
	switch b[i] {
	case '"':
		for i++; b[i] != '"'; i++ {
			if b[i] == '\\' {
				i++
			}
		}
		return i + 1
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = valueEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[i])) {
		i++
	}
	return i
}

// readMembers is objectMembers token by token.
func readMembers(body []byte, m *members) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return errors.New("body must be a JSON object")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("body must be a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errors.New("body is not valid JSON")
		}
		name := tok.(string) // inside an object, the decoder yields names here
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return errors.New("body is not valid JSON")
		}
		if !m.add(name, string(raw)) {
			return fmt.Errorf("member %q appears more than once", name)
		}
	}
	if _, err := dec.Token(); err != nil {
		return errors.New("body is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("body must hold a single JSON object")
	}
	return nil
}

// errNotString is stringMember's answer for a member that is not a string.
var errNotString = errors.New("not a string")

// stringMember reads member name as a JSON string: ok is false when absent.
// Its other errors are details a client can read.
func stringMember(m *members, name string) (s string, ok bool, err error) {
	raw, ok := m.get(name)
	if !ok {
		return "", false, nil
	}
	if len(raw) == 0 || raw[0] != '"' {
		return "", true, errNotString
	}
	if strings.IndexByte(raw, '\\') < 0 {
		// No escape: the literal is its contents (json.Valid refused raw
		// control characters already).
		s = raw[1 : len(raw)-1]
	} else if s, err = unescape(raw); err != nil {
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

// unescape decodes a string literal with escapes. Its result is a variable
// of its own: one whose address went to encoding/json would move to the
// heap on every call, escapes or not.
func unescape(raw string) (string, error) {
	var s string
	err := json.Unmarshal([]byte(raw), &s)
	return s, err
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
func hasLoneSurrogate(raw string) bool {
	unit := func(i int) rune { // the \uXXXX escape at raw[i:], or -1
		if i+6 > len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
			return -1
		}
		n, err := strconv.ParseUint(raw[i+2:i+6], 16, 16)
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
