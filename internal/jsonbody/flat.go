package jsonbody

// splitFlat splits body, valid UTF-8, when it is a JSON object whose members
// are all scalars: strings without escapes, numbers, true, false or null,
// under names without escapes, each named once. It checks the grammar as it
// goes, so that such a body, nearly every request's, is read once instead
// of being validated by encoding/json first; it reports false for anything
// else, leaving some of the members in m.
func splitFlat(b []byte, m *members) bool {
	body := string(b) // one copy, which every name and value slices
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	if i = skipSpace(body, i+1); i < len(body) && body[i] == '}' {
		return skipSpace(body, i+1) == len(body)
	}
	for {
		nameEnd, ok := plainStringEnd(body, i)
		if !ok {
			return false
		}
		name := body[i+1 : nameEnd-1]
		if i = skipSpace(body, nameEnd); i >= len(body) || body[i] != ':' {
			return false
		}
		start := skipSpace(body, i+1)
		end, ok := scalarEnd(body, start)
		if !ok || !m.add(name, body[start:end]) {
			return false
		}
		switch i = skipSpace(body, end); {
		case i >= len(body):
			return false
		case body[i] == '}':
			return skipSpace(body, i+1) == len(body)
		case body[i] != ',':
			return false
		}
		i = skipSpace(body, i+1)
	}
}

// scalarEnd is the index just past the scalar value at b[i], and whether
// there is one: a string without escapes, a number, true, false or null.
func scalarEnd(b string, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return plainStringEnd(b, i)
	case c == '-' || c >= '0' && c <= '9':
		return numberEnd(b, i)
	}
	for _, lit := range [...]string{"true", "false", "null"} {
		if len(b)-i >= len(lit) && b[i:i+len(lit)] == lit {
			return i + len(lit), true
		}
	}
	return 0, false
}

// plainStringEnd is the index just past the string at b[i], and whether it
// is one without escapes or control characters (UTF-8 is checked already).
func plainStringEnd(b string, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\' || c < 0x20:
			return 0, false
		}
	}
	return 0, false
}

// numberEnd is the index just past the number at b[i], and whether it is
// one by JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func numberEnd(b string, i int) (int, bool) {
	digits := func(i int) int { // past the digits from b[i], none or more
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(i + 1); j > i+1 {
			i = j
		} else {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}
