package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// forgetEverything deletes every row a request committed, as a failover to
// an asynchronous standby or a restore loses them, in one transaction
// (retried if the receipt dispatcher's own deadlocks with it).
func forgetEverything(t *testing.T, svc *testutil.Service) {
	t.Helper()
	require.NoError(t, db.WithTx(context.Background(), svc.Pool, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `
			DELETE FROM receipt_outbox;
			DELETE FROM receipts;
			DELETE FROM refunds;
			DELETE FROM payments;
			DELETE FROM audit_records;
			DELETE FROM idempotency_keys;`)
		return err
	}))
}

// Defect: a create that Stripe executed but answered with a 500, five
// minutes before the database lost the key's rows. The retry is new to the
// database, Stripe replays the 500, and the lookup listed only from two
// minutes before the retry's attempt while search had not caught up: it
// found nothing and charged again under the next Stripe key. A replayed
// error on a key this database never sent now looks back as far as Stripe
// could still be replaying it.
func TestLostHistoryRetryAdoptsAnOlderChargeWhileSearchLags(t *testing.T) {
	t.Parallel()
	em := startSkewedEmulator(t, stripefake.Options{SearchLag: time.Hour})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em.Emulator, Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)

	em.setOffset(-5 * time.Minute) // the first attempt, five minutes ago
	em.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged})
	requireProblem(t, svc.PostPayment(t, apiKey, "lost", visa), http.StatusServiceUnavailable, "processor-unavailable")
	require.Len(t, em.PaymentIntents(), 1, "the 500 did charge")
	em.setOffset(0)
	forgetEverything(t, svc)

	resp := svc.PostPayment(t, apiKey, "lost", visa)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	pis := em.PaymentIntents()
	require.Len(t, pis, 1, "adopted, not charged again")
	require.Equal(t, pis[0].ID, *decode[payment](t, resp).StripePaymentIntentID)

	var attemptAt time.Time
	require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT charge_attempt_at FROM payments").Scan(&attemptAt))
	require.Less(t, attemptAt, time.Now().Add(-24*time.Hour), "the attempt's start moved back, for every later run")
}

// Defect: with the database's clock three minutes ahead of Stripe's, the
// PaymentIntent a 500 had created carried a created time before the
// lookup's window, which trusted a fixed two-minute lookback to cover any
// skew; search lagged, and the next Stripe key charged again. The window
// now moves by the skew measured from Stripe's Date header.
func TestSkewedClocksNeverHideTheChargeOfA500(t *testing.T) {
	t.Parallel()
	em := startSkewedEmulator(t, stripefake.Options{SearchLag: time.Hour})
	em.setOffset(-3 * time.Minute) // Stripe's clock three minutes behind ours
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em.Emulator, Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)

	em.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged})
	requireProblem(t, svc.PostPayment(t, apiKey, "skewed", visa), http.StatusServiceUnavailable, "processor-unavailable")
	resp := svc.PostPayment(t, apiKey, "skewed", visa)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	pis := em.PaymentIntents()
	require.Len(t, pis, 1, "adopted, not charged again")
	require.Equal(t, pis[0].ID, *decode[payment](t, resp).StripePaymentIntentID)
}
