// Package ids makes the public ids of payments and refunds: a type prefix
// and a UUIDv7 in 26 characters of lowercase Crockford base32, as in
// pay_01jf8d3m5x2b7k9q4w6r8t0v1y. Stripe's ids look alike.
//
// An id is random and time-ordered, never derived from a database
// sequence: a restore, a failover that lost commits, or a second database
// can never hand a client an id it already holds for something else, and
// ids say nothing about volume. The database keeps the UUID (16 bytes, its
// own byte order), and base32 keeps that order, so lists page by it in
// creation order.
package ids

import (
	"encoding/base32"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// The prefixes of the ids the API hands out.
const (
	Payment = "pay"
	Refund  = "re"
)

// encoding is Crockford's base32 alphabet in lower case: in ASCII order,
// so that the encoded ids sort as the UUIDs do.
var encoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// encodedLen is the length of an encoded UUID: 128 bits in 5-bit digits.
const encodedLen = 26

// New returns the value of a new id.
func New() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// Format returns the public id of value, with prefix.
func Format(prefix string, value uuid.UUID) string {
	return prefix + "_" + encoding.EncodeToString(value[:])
}

// Parse reads a public id with prefix. It accepts only the form Format
// writes, so that one value has one id.
func Parse(prefix, id string) (uuid.UUID, error) {
	var value uuid.UUID
	rest, ok := strings.CutPrefix(id, prefix+"_")
	if !ok || len(rest) != encodedLen {
		return value, fmt.Errorf("not a %s_ id", prefix)
	}
	b, err := encoding.DecodeString(rest)
	if err != nil || len(b) != len(value) {
		return value, fmt.Errorf("not a %s_ id", prefix)
	}
	copy(value[:], b)
	if Format(prefix, value) != id {
		return value, fmt.Errorf("not a %s_ id", prefix)
	}
	return value, nil
}

// ParseNumber reads the number of a row made before public ids, as its
// stored answers show it: a positive integer, written as Go writes it.
func ParseNumber(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0 && strconv.FormatInt(n, 10) == s
}
