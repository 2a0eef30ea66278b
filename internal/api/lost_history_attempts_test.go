package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestLostHistoryLaterStripeKey covers a lost key whose charge was made by a
// later Stripe key than its first.
//
// Defect: before a fresh key's first send after a history loss, the charge
// searches only (no list), on the reasoning "search sees everything older
// than its lag, and anything younger Stripe replays under the key". That
// holds for Stripe key 1 alone. A lost key whose key 1 met a 500 (spent)
// and whose key 2 charged late in its send window has key 1 forgotten by
// Stripe (first used more than 24 h ago) while key 2's PaymentIntent is
// younger than the search lag (the cut-off leaves it as little as 11
// minutes). Re-sent after the restore, key 1 is a new create at Stripe: the
// customer is charged a second time.
func TestLostHistoryLaterStripeKey(t *testing.T) {
	t.Parallel()
	em := startSkewedEmulator(t, stripefake.Options{SearchLag: time.Hour})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em.Emulator, HeartbeatInterval: 50 * time.Millisecond,
		Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)

	// The key's first send, 24h10m ago by Stripe's clock: a 500 that
	// created nothing, saved under Stripe key 1.
	em.setOffset(-(24*time.Hour + 10*time.Minute))
	em.Inject(stripefake.Fault{Kind: stripefake.Fault500})
	requireProblem(t, svc.PostPayment(t, apiKey, "late-second-key", visa), http.StatusServiceUnavailable, "processor-unavailable")

	// 23h45m later (within the send cut-off of 23h49m): key 1 is found
	// spent, nothing of it is listed, and key 2 charges. That is 25
	// minutes before now.
	em.setOffset(-25 * time.Minute)
	var resp *testutil.Response
	for range 3 { // spent, then (once the visibility margin passed) key 2
		resp = svc.PostPayment(t, apiKey, "late-second-key", visa)
		if resp.Status == http.StatusCreated {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	first := decode[payment](t, resp)
	var attempt int
	require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT charge_attempt FROM payments").Scan(&attempt))
	require.Equal(t, 2, attempt, "charged by Stripe key 2")
	require.Len(t, em.PaymentIntents(), 1)

	// A restore to a backup older than the key loses it; the heartbeat sees
	// the loss. The client sends the key again, as the runbook says.
	em.setOffset(0)
	forgetEverything(t, svc)
	_, err := svc.Pool.Exec(context.Background(), "UPDATE deployment SET history_lost_at = now()")
	require.NoError(t, err)
	testutil.WaitFor(t, 5*time.Second, 20*time.Millisecond, func() bool { return !svc.App.HistoryLostAt().IsZero() })

	again := svc.PostPayment(t, apiKey, "late-second-key", visa)
	require.Equal(t, 1, len(em.PaymentIntents()),
		"the customer was charged twice for one intent: PaymentIntent %s (Stripe key 2, 25 minutes old) and a new one under the forgotten key 1 (answer %d %s)",
		*first.StripePaymentIntentID, again.Status, again.Body)
}
