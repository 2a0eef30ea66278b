package api_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// The API benchmarks run the whole service over real HTTP on loopback, with
// its own database (TEST_DATABASE_URL) and the Stripe emulator, one request
// at a time: they measure the latency of one request through every layer,
// and its allocations in this process (client, service and emulator
// together). `make bench` measures throughput under concurrency.

// BenchmarkReplay measures a replay: the same request as a payment that has
// already finished, answered from the stored response.
func BenchmarkReplay(b *testing.B) {
	svc := testutil.StartService(b, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(b)
	first := svc.PostPayment(b, apiKey, "bench-replay", visa)
	if first.Status != http.StatusCreated {
		b.Fatalf("first request: status %d: %s", first.Status, first.Body)
	}
	b.ReportAllocs()
	for b.Loop() {
		resp := svc.PostPayment(b, apiKey, "bench-replay", visa)
		if resp.Status != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" {
			b.Fatalf("replay: status %d, Idempotent-Replayed %q: %s", resp.Status, resp.Header.Get("Idempotent-Replayed"), resp.Body)
		}
	}
}

// BenchmarkFreshPayment measures a new payment: reservation, the charge on
// the emulator and the finish, two commits.
func BenchmarkFreshPayment(b *testing.B) {
	svc := testutil.StartService(b, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(b)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		resp := svc.PostPayment(b, apiKey, "bench-fresh-"+strconv.Itoa(n), visa)
		if resp.Status != http.StatusCreated {
			b.Fatalf("payment %d: status %d: %s", n, resp.Status, resp.Body)
		}
	}
}
