package idempotency_test

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/idempotency"
)

func TestDigest(t *testing.T) {
	t.Parallel()
	const body = `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`
	// Stored keys depend on this exact construction: the first 16 bytes of
	// SHA-256 over method, path and body, each ended by a line break but
	// the last. A body too long for the stack buffer gets the same.
	for _, b := range []string{body, "", strings.Repeat("x", 1024-len("POST\n/payments\n")), strings.Repeat("x", 2000)} {
		sum := sha256.Sum256([]byte("POST\n/payments\n" + b))
		got := idempotency.Digest("POST", "/payments", []byte(b))
		require.Equal(t, sum[:idempotency.DigestSize], got)
		require.Equal(t, idempotency.DigestSize, cap(got), "no room held past the digest")
	}

	// Any byte of the request changes it: where the body was written
	// differently, the fingerprint decides.
	base := idempotency.Digest("POST", "/payments", []byte(body))
	for _, other := range [][3]string{
		{"PUT", "/payments", body},
		{"POST", "/payments/1/refunds", body},
		{"POST", "/payments/%31/refunds", body}, // routed as sent: not /payments/1/refunds
		{"POST", "/payments", body + "\n"},
		{"POST", "/payments", strings.Replace(body, `"amount":2000,`, "", 1) + `,"amount":2000`},
	} {
		require.NotEqual(t, base, idempotency.Digest(other[0], other[1], []byte(other[2])), "%q", other)
	}
}
