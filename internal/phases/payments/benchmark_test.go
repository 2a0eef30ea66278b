package payments_test

import (
	"testing"

	"github.com/paymentsd/paymentsd/internal/phases/payments"
)

// BenchmarkDecode is the strict decoding and validation of a payment body,
// on every request (fresh or replayed) before its key is looked up.
func BenchmarkDecode(b *testing.B) {
	body := []byte(`{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "description": "Order 1234"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := payments.Decode(body, nil); errs != nil {
			b.Fatal(errs)
		}
	}
}
