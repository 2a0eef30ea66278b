package chaos

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// authorize makes one manual PaymentIntent at the emulator behind emu, as
// the service does, and returns its id.
func authorize(t *testing.T, emu *Emulator, key string) string {
	t.Helper()
	form := url.Values{"amount": {"2000"}, "currency": {"usd"}, "payment_method": {"pm_card_visa"},
		"confirm": {"true"}, "capture_method": {"manual"}}
	req, err := http.NewRequest(http.MethodPost, emu.Base+"/v1/payment_intents", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk_test_chaos")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", key)
	resp, err := emu.HTTP.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	pis, err := emu.PaymentIntents(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, pis)
	require.Equal(t, statusRequiresCapture, pis[len(pis)-1].Status)
	return pis[len(pis)-1].ID
}

func startEmulator(t *testing.T, window time.Duration) *Emulator {
	t.Helper()
	fake := stripefake.New(stripefake.Options{AuthorizationWindow: window})
	srv := httptest.NewServer(fake)
	t.Cleanup(func() { srv.Close(); fake.Close() })
	return &Emulator{Base: srv.URL, HTTP: srv.Client()}
}

func statusOf(t *testing.T, emu *Emulator, id string) string {
	t.Helper()
	pis, err := emu.PaymentIntents(context.Background())
	require.NoError(t, err)
	for _, pi := range pis {
		if pi.ID == id {
			return pi.Status
		}
	}
	t.Fatalf("no PaymentIntent %s", id)
	return ""
}

// The harness settles the webhooks only once Stripe has canceled every
// authorization whose window ends within the drain bound, so that no
// cancel comes between the settling and the snapshot.
func TestAwaitAuthorizationsEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("WaitsForTheWindowToClose", func(t *testing.T) {
		t.Parallel()
		emu := startEmulator(t, 1500*time.Millisecond)
		id := authorize(t, emu, "k1")
		start := time.Now()
		require.NoError(t, AwaitAuthorizationsEnded(ctx, emu, 1500*time.Millisecond, time.Minute, NewEvents(io.Discard)))
		require.Equal(t, statusCanceled, statusOf(t, emu, id), "returned after %s", time.Since(start))
	})

	t.Run("DoesNotWaitForAWindowLongerThanTheBound", func(t *testing.T) {
		t.Parallel()
		emu := startEmulator(t, time.Hour)
		id := authorize(t, emu, "k1")
		start := time.Now()
		require.NoError(t, AwaitAuthorizationsEnded(ctx, emu, time.Hour, time.Minute, NewEvents(io.Discard)))
		require.Less(t, time.Since(start), 10*time.Second)
		require.Equal(t, statusRequiresCapture, statusOf(t, emu, id))
	})
}
