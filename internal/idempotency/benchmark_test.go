package idempotency_test

import (
	"net/http"
	"testing"

	"github.com/paymentsd/paymentsd/internal/idempotency"
)

// benchmarkBody is a realistic payment request: about 100 bytes, members in
// no particular order, with white space, as a client would send it.
const benchmarkBody = `{"payment_method": "pm_card_visa", "amount": 2000, "currency": "usd", "description": "order 12345"}`

func BenchmarkParseKeyBare(b *testing.B) {
	values := []string{"9c4f1d2e-7b3a-4e8f-a1c6-5d2b8e9f0a13"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := idempotency.ParseKey(values); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseKeyQuoted(b *testing.B) {
	values := []string{`"9c4f1d2e-7b3a-4e8f-a1c6-5d2b8e9f0a13"`}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := idempotency.ParseKey(values); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFingerprint(b *testing.B) {
	body := []byte(benchmarkBody)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, _, err := idempotency.Fingerprint(http.MethodPost, "/payments", body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFingerprintCanonical fingerprints params as an endpoint hands
// them over: encoded by encoding/json, members sorted, no white space.
func BenchmarkFingerprintCanonical(b *testing.B) {
	body := []byte(`{"amount":2000,"currency":"usd","description":"Order 1234","payment_method":"pm_card_visa"}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, _, err := idempotency.Fingerprint(http.MethodPost, "/payments", body); err != nil {
			b.Fatal(err)
		}
	}
}
