package idempotency

import "unicode/utf8"

// AppendString appends s to dst as a JSON string in RFC 8785's form
// (section 3.2.2.2): a quotation mark and a reverse solidus escaped, the
// five control characters that have one as \b, \t, \n, \f and \r, the rest
// below U+0020 as \u00xx in lowercase hex, and every other character as it
// is, in UTF-8. s must be valid UTF-8.
//
// An endpoint that writes its canonical params member by member with it
// (payments.Params.Canonical, say) gets exactly what Fingerprint would make
// of them, without encoding/json's reflection and its HTML escapes.
func AppendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	return append(append(dst, s[start:]...), '"')
}
