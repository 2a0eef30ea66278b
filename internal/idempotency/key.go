package idempotency

import (
	"errors"
	"fmt"
	"strings"

	"github.com/dunglas/httpsfv"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// MaxKeyLength is the longest key accepted, in characters after unquoting.
const MaxKeyLength = 255

// ErrMissing means the request carried no Idempotency-Key.
var ErrMissing = errors.New("the Idempotency-Key header is required")

// ParseKey reads the key from the header's values. Two forms name the same
// key k:
//
//   - "k", an RFC 8941 sf-string, as the IETF httpapi-idempotency-key-header
//     draft specifies; parameters are refused, since a key is a bare string;
//   - k, a bare opaque value as Stripe accepts it: visible ASCII without the
//     characters that structure a structured field (DQUOTE, parentheses,
//     semicolon, comma, backslash), so that no structured value is silently
//     taken for an opaque one.
//
// Either way the key has 1 to MaxKeyLength characters.
func ParseKey(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", ErrMissing
	case 1:
	default:
		return "", errors.New("the Idempotency-Key header must appear once")
	}
	v := strings.Trim(values[0], " \t")
	if v == "" {
		return "", ErrMissing
	}
	var key string
	if v[0] == '"' {
		item, err := httpsfv.UnmarshalItem([]string{v})
		if err != nil {
			return "", errors.New("the Idempotency-Key header is not a valid structured-field string")
		}
		s, ok := item.Value.(string)
		if !ok {
			return "", errors.New("the Idempotency-Key header must be a string")
		}
		if len(item.Params.Names()) > 0 {
			return "", errors.New("the Idempotency-Key header must not carry parameters")
		}
		key = s
	} else {
		for i := 0; i < len(v); i++ {
			if c := v[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"();,\`, c) >= 0 {
				return "", fmt.Errorf("the Idempotency-Key header has a character not allowed in a bare key at offset %d; quote the key as a structured-field string", i)
			}
		}
		key = v
	}
	if len(key) == 0 || len(key) > MaxKeyLength {
		return "", fmt.Errorf("the idempotency key must have 1 to %d characters", MaxKeyLength)
	}
	return key, nil
}
