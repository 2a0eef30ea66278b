package idempotency

import "unicode/utf8"

// maxCanonicalDepth bounds the nesting alreadyCanonical follows; deeper
// bodies go to the full canonicalization.
const maxCanonicalDepth = 32

// alreadyCanonical reports whether body is, byte for byte, its own RFC 8785
// form, by a check that is deliberately narrow: no white space, strings
// without escapes or control characters, integers of at most 15 digits,
// object members with ASCII names in strictly ascending order. A body the
// endpoints decoded and encoded again (payments.Params.Canonical) passes it
// unless a string holds a character that needs an escape, which saves
// parsing it a second time; anything it refuses, the JCS library decides.
// FuzzAlreadyCanonical checks that the library would return what it accepts
// unchanged.
func alreadyCanonical(body []byte) bool {
	rest, ok := canonicalValue(body, 0)
	return ok && len(rest) == 0
}

// canonicalValue reads one value from the start of b and returns what
// follows it.
func canonicalValue(b []byte, depth int) ([]byte, bool) {
	if len(b) == 0 || depth > maxCanonicalDepth {
		return nil, false
	}
	switch c := b[0]; {
	case c == '{':
		return canonicalObject(b[1:], depth+1)
	case c == '[':
		return canonicalArray(b[1:], depth+1)
	case c == '"':
		_, rest, ok := canonicalString(b)
		return rest, ok
	case c == '-' || c >= '0' && c <= '9':
		return canonicalInteger(b)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if len(b) >= len(lit) && string(b[:len(lit)]) == lit {
			return b[len(lit):], true
		}
	}
	return nil, false
}

func canonicalObject(b []byte, depth int) ([]byte, bool) {
	if len(b) > 0 && b[0] == '}' {
		return b[1:], true
	}
	var prev []byte
	for first := true; ; first = false {
		name, rest, ok := canonicalString(b)
		if !ok || (!first && string(name) <= string(prev)) || len(rest) == 0 || rest[0] != ':' {
			return nil, false
		}
		for _, c := range name {
			if c >= utf8.RuneSelf { // byte order is UTF-16 order for ASCII only
				return nil, false
			}
		}
		if rest, ok = canonicalValue(rest[1:], depth); !ok || len(rest) == 0 {
			return nil, false
		}
		switch rest[0] {
		case '}':
			return rest[1:], true
		case ',':
			prev, b = name, rest[1:]
		default:
			return nil, false
		}
	}
}

func canonicalArray(b []byte, depth int) ([]byte, bool) {
	if len(b) > 0 && b[0] == ']' {
		return b[1:], true
	}
	for {
		rest, ok := canonicalValue(b, depth)
		if !ok || len(rest) == 0 {
			return nil, false
		}
		switch rest[0] {
		case ']':
			return rest[1:], true
		case ',':
			b = rest[1:]
		default:
			return nil, false
		}
	}
}

// canonicalString reads a string literal with no escape and no control
// character, in valid UTF-8, and returns its contents.
func canonicalString(b []byte) (contents, rest []byte, ok bool) {
	if len(b) == 0 || b[0] != '"' {
		return nil, nil, false
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			contents = b[1:i]
			return contents, b[i+1:], utf8.Valid(contents)
		case c == '\\' || c < 0x20 || c == 0x7f:
			return nil, nil, false
		}
	}
	return nil, nil, false
}

// canonicalInteger reads an integer without a leading zero, exponent,
// fraction or minus zero, small enough to be exact as a double.
func canonicalInteger(b []byte) ([]byte, bool) {
	i := 0
	if b[0] == '-' {
		i++
	}
	start := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	digits := b[start:i]
	switch {
	case len(digits) == 0 || len(digits) > 15:
		return nil, false
	case digits[0] == '0' && (len(digits) > 1 || start > 0):
		return nil, false
	case i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E'):
		return nil, false
	}
	return b[i:], true
}
