package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// DefaultFaults is the emulator's chaos during a run: every PaymentIntent
// create has a 5% chance of a 500 that created nothing, 2% of a 500 after the
// PaymentIntent was created and confirmed (the 500 is what its Stripe
// idempotency key replays), 5% of a charge whose answer is lost, 2% of a hang
// longer than paymentsd's 3 s Stripe timeout (setup.go), 2% of a 4 s latency
// that outlives that timeout while the charge still happens, and up to 200 ms
// of latency. Search lags writes by 2 s. Injected idempotency errors stay off
// (-p-idempotency-error): paymentsd cannot tell one from a real key misuse,
// so each one leaves a payment needing attention. Of the webhook events
// (webhooks.go), drawn independently: 20% are delivered up to 3 s late, 10%
// twice, 10% held back until a later one went, and 10% lose their first
// attempt.
var DefaultFaults = stripefake.AdminChaos{
	P500: 0.05, PLostAnswer: 0.05, PHang: 0.02,
	P500Charged: 0.02, PIdempotencyError: 0, POutliveClient: 0.02,
	LatencyMS: 0, MaxLatencyMS: 200, HangForMS: 4000,
	OutliveLatencyMS: 4000, SearchLagMS: 2000,
	PWebhookDelay: 0.2, WebhookDelayMS: 3000, PWebhookDuplicate: 0.1, PWebhookReorder: 0.1, PWebhookLost: 0.1,
}

// Emulator talks to the Stripe emulator's admin endpoints.
type Emulator struct {
	Base string
	HTTP *http.Client
}

// SetChaos replaces the emulator's chaos; the zero value turns it off.
func (e *Emulator) SetChaos(ctx context.Context, c stripefake.AdminChaos) error {
	return e.do(ctx, http.MethodPost, "/_fake/faults", stripefake.AdminFaultsRequest{Chaos: &c}, nil)
}

// Release releases every request the emulator holds hung.
func (e *Emulator) Release(ctx context.Context) error {
	return e.do(ctx, http.MethodPost, "/_fake/release", struct{}{}, nil)
}

// Stats returns the emulator's counters by their JSON names.
func (e *Emulator) Stats(ctx context.Context) (map[string]int64, error) {
	var st map[string]int64
	return st, e.do(ctx, http.MethodGet, "/_fake/stats", nil, &st)
}

// PaymentIntents returns every PaymentIntent the emulator holds.
func (e *Emulator) PaymentIntents(ctx context.Context) ([]stripefake.PaymentIntent, error) {
	var pis []stripefake.PaymentIntent
	return pis, e.do(ctx, http.MethodGet, "/_fake/payment_intents", nil, &pis)
}

// Refunds returns every refund the emulator holds.
func (e *Emulator) Refunds(ctx context.Context) ([]stripefake.Refund, error) {
	var rs []stripefake.Refund
	return rs, e.do(ctx, http.MethodGet, "/_fake/refunds", nil, &rs)
}

func (e *Emulator) do(ctx context.Context, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.Base+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("emulator %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("emulator %s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("emulator %s %s: %s: %s", method, path, resp.Status, raw)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("emulator %s %s: %w", method, path, err)
	}
	return nil
}
