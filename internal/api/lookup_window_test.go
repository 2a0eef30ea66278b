package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// TestLookupWindow covers where a lookup looks: a key's own charge a day
// on, a restore of an older backup, a lookup that failed on the first run,
// the Stripe objects of an earlier use of a key, a Date header a proxy
// rewrote.
func TestLookupWindow(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		userID int64
	}

	setupWith := func(t *testing.T, opts testutil.ServiceOptions) (*testutil.Service, *testBundle) {
		t.Helper()
		svc := testutil.StartService(t, opts)
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, userID: userID}
	}

	// Defect: reconcile (past the send cut-off, lookup alone) searches only
	// from searchHorizon (24 h) before its list window, and the list window is
	// the last SearchLag+LookupLookback (1h10m) before *now*. So any reconcile
	// run later than KeyCreatedAt + 25h10m cannot see a PaymentIntent made by
	// the key's first sends: it finds nothing and stores "not charged" (400
	// payment-rejected, processor_code not_charged) for a charged customer,
	// who then pays again under a new key. Reconcile runs up to 48 h after the
	// key was made (LookupGrace), so the blind stretch is most of its life.
	t.Run("ReconcileADayLateStillSeesTheKeysOwnCharge", func(t *testing.T) {
		t.Parallel()
		em := startSkewedEmulator(t, stripefake.Options{})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em.Emulator, Workers: quietCompleter})
		chargedADayAgo(t, em, svc, bundle.apiKey, "day-old")

		resp := svc.PostPayment(t, bundle.apiKey, "day-old", visa)
		require.NotContains(t, string(resp.Body), `"processor_code":"not_charged"`,
			"the card was charged 26 h ago by this key's first send; Stripe still has the PaymentIntent")
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Equal(t, chargeOf(t, em), *decode[payment](t, resp).StripePaymentIntentID)
	})

	// Defect: the operator's not-charged looks with the same window from
	// *now* (State{} with time.Now): search no earlier than now - 25h10m, list
	// the last 1h10m. A parked key is typically settled a day or more after
	// its sends (a weekend, a key parked by LookupGrace at created+48h), and
	// then every PaymentIntent of its intent is invisible: "not charged" is
	// accepted though Stripe shows the charge succeeded. Here the key was
	// parked with its charge 26 h old.
	t.Run("OperatorNotChargedSeesAChargeOlderThanADay", func(t *testing.T) {
		t.Parallel()
		em := startSkewedEmulator(t, stripefake.Options{})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em.Emulator, Workers: quietCompleter})
		chargedADayAgo(t, em, svc, bundle.apiKey, "parked-day-old")
		// Parked as reconcile parks a key whose lookups kept failing.
		_, err := svc.Pool.Exec(context.Background(), `UPDATE idempotency_keys SET needs_attention_at = now(), needs_attention_kind = 'unknown_outcome',
			last_error = 'lookups past Stripe''s idempotency window keep failing' WHERE idempotency_key = 'parked-day-old'`)
		require.NoError(t, err)

		_, err = svc.App.Resolver.NotCharged(context.Background(), keyID(t, svc, "parked-day-old"))
		require.ErrorIs(t, err, payments.ErrResolutionRefused,
			"PaymentIntent %s of this intent succeeded 26 h ago: the operator must not be allowed to say not charged", chargeOf(t, em))
	})

	// Defect: the pre-send lookup after a loss searches only from a day (and
	// 20 minutes) before the loss was seen. A restore of a backup older than
	// that (last week's pg_dump, a point-in-time restore to three days ago: a
	// new oid or timeline, so the loss is seen) loses keys whose sends are
	// older, and operations.md tells clients to send again "every key whose
	// payment answers 404". Each such key reaches a Stripe that forgot it and
	// is charged a second time. Here: a payment made 50 h before a restore
	// that lost it; the client re-sends the key as the runbook says.
	t.Run("RestoreOfAnOlderBackupNeverChargesALostKeyAgain", func(t *testing.T) {
		t.Parallel()
		em := startSkewedEmulator(t, stripefake.Options{})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em.Emulator, HeartbeatInterval: 50 * time.Millisecond,
			Workers: quietCompleter})

		em.setOffset(-50 * time.Hour) // made two days before the restore's loss
		first := paid(t, svc, bundle.apiKey, "two-days-lost")
		em.setOffset(0)
		paid(t, svc, bundle.apiKey, "yesterday") // the charger measures Stripe's clock as it is now
		forgetEverything(t, svc)                 // the backup restored predates both
		_, err := svc.Pool.Exec(context.Background(), "UPDATE deployment SET history_lost_at = now()")
		require.NoError(t, err)
		testutil.WaitFor(t, 5*time.Second, 20*time.Millisecond, func() bool { return !svc.App.HistoryLostAt().IsZero() })

		resp := svc.PostPayment(t, bundle.apiKey, "two-days-lost", visa)
		require.Len(t, em.PaymentIntents(), 2, "the lost key's charge of two days ago exists at Stripe; it was charged again")
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Equal(t, *first.StripePaymentIntentID, *decode[payment](t, resp).StripePaymentIntentID)
	})

	// Defect: the pre-send lookup after a loss runs only while the key is
	// "Fresh" (Runs == 1). If that first run does not get through it (a search
	// that times out, a 5xx from Stripe's search, the process dying after
	// commit 1, a client hanging up), the key's next run has Runs == 2, skips
	// the lookup, and sends attempt 1 to a Stripe that forgot the key 24 h
	// ago: a second charge. (Search is the endpoint most likely to fail: it
	// is the one Stripe serves from a lagging index.)
	t.Run("LostKeyWhoseFirstLookupFailedIsNeverChargedAgain", func(t *testing.T) {
		t.Parallel()
		em := startSkewedEmulator(t, stripefake.Options{})
		var searchDown atomic.Bool
		front := switchableFront(t, em.Emulator, func(r *http.Request) bool {
			return searchDown.Load() && strings.HasSuffix(r.URL.Path, "/search")
		})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: front, HeartbeatInterval: 50 * time.Millisecond,
			Workers: quietCompleter})

		first := lostADayAgo(t, em, svc, bundle.apiKey, "long-lost")

		searchDown.Store(true) // the first run's lookup fails
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "long-lost", visa), http.StatusServiceUnavailable, "processor-unavailable")
		require.Len(t, em.PaymentIntents(), 1)
		searchDown.Store(false)

		resp := svc.PostPayment(t, bundle.apiKey, "long-lost", visa)
		require.Len(t, em.PaymentIntents(), 1, "charged twice for one intent (answer %d %s)", resp.Status, resp.Body)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Equal(t, *first.StripePaymentIntentID, *decode[payment](t, resp).StripePaymentIntentID)
	})

	// Finding (Low): the skew to Stripe's clock is whatever the last answer's
	// Date header said, unchecked. A Date that is wrong (an egress proxy or
	// API gateway that sets its own, a cached answer) moves the lookup's list
	// window with it: with Date 20 minutes behind, the list after a replayed
	// 500 stops 19 minutes before the charge it is there to find, and while
	// search lags (here 5 minutes, "under a minute" normally) the next Stripe
	// key charges again.
	t.Run("AWrongDateHeaderNeverHidesTheChargeOfA500", func(t *testing.T) {
		t.Parallel()
		em := testutil.StartEmulator(t, stripefake.Options{SearchLag: 5 * time.Minute})
		target, err := url.Parse(em.URL)
		require.NoError(t, err)
		proxy := httputil.NewSingleHostReverseProxy(target)
		proxy.ModifyResponse = func(resp *http.Response) error {
			resp.Header.Set("Date", time.Now().Add(-20*time.Minute).UTC().Format(http.TimeFormat))
			return nil
		}
		srv := httptest.NewServer(proxy)
		t.Cleanup(srv.Close)
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: &testutil.Emulator{Server: em.Server, URL: srv.URL},
			Workers: quietCompleter, Stripe: payments.StripeConfig{VisibilityMargin: 100 * time.Millisecond}})

		em.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "dated", visa), http.StatusServiceUnavailable, "processor-unavailable")
		var resp *testutil.Response
		for range 3 {
			resp = svc.PostPayment(t, bundle.apiKey, "dated", visa)
			time.Sleep(200 * time.Millisecond)
		}
		require.Len(t, em.PaymentIntents(), 1, "charged twice for one intent (answer %d %s)", resp.Status, resp.Body)
	})

	// Defect: the lookup that settled an indeterminate 500 matched PaymentIntents
	// by intent (namespace, user, client key) through search, with no bound in
	// time. Once a key's tombstone has expired the key is "new again" (by
	// design), but its intent is the same as the old request's: the lookup of
	// the new request finds the old request's PaymentIntent, from months ago.
	//   - same amount: it is adopted as this payment's charge (a charge that did
	//     not happen), and since the old payment row holds that PaymentIntent the
	//     record fails on the unique index: 500 on every retry, for ever, and
	//     the completer never gets further either.
	//   - another amount: the key is parked, and the operator can resolve it
	//     neither way: not-charged is refused (a PaymentIntent of the intent
	//     succeeded), charged is refused (its amount differs). Stranded for ever.
	t.Run("AKeyReusedAfterItsTombstoneExpiredNeverAdoptsTheOldCharge", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			body string
		}{
			{"same request", visa},
			{"another amount", strings.Replace(visa, "2000", "3000", 1)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				em := startSkewedEmulator(t, stripefake.Options{})
				svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em.Emulator, Workers: quietCompleter})

				// 91 days ago (Stripe's clock): the key's first use.
				em.setOffset(-91 * 24 * time.Hour)
				first := svc.PostPayment(t, bundle.apiKey, "monthly", visa)
				require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
				oldPI := *decode[payment](t, first).StripePaymentIntentID
				expireKey(t, svc, "monthly")
				em.setOffset(0)

				// Today: the key is used again. Its first create meets a plain 500
				// (nothing created); the retry finds the key spent and looks up.
				em.Inject(stripefake.Fault{Kind: stripefake.Fault500})
				requireProblem(t, svc.PostPayment(t, bundle.apiKey, "monthly", tc.body), http.StatusServiceUnavailable, "processor-unavailable")
				retry := svc.PostPayment(t, bundle.apiKey, "monthly", tc.body)

				if retry.Status == http.StatusServiceUnavailable {
					// Parked: the operator must be able to settle it one way or the
					// other. Nothing was charged for this request.
					id := keyID(t, svc, "monthly")
					_, errCharged := svc.App.Resolver.Charged(context.Background(), id, oldPI)
					_, errNotCharged := svc.App.Resolver.NotCharged(context.Background(), id)
					require.NoError(t, errNotCharged, "the key (answered %d %s) is stranded: as charged: %v; as not charged",
						retry.Status, retry.Body, errCharged)
					return
				}
				require.Equal(t, http.StatusCreated, retry.Status, "body: %s", retry.Body)
				require.NotEqual(t, oldPI, *decode[payment](t, retry).StripePaymentIntentID,
					"the new payment must not claim the 91-day-old PaymentIntent")
			})
		}
	})

	// Defect: the refund lookup lists every Refund of the PaymentIntent that
	// carries the refund's intent, with no bound in time (the payment side's
	// searchHorizon was added for exactly this). A refund key reused once its
	// tombstone expired (a "new key again", by design), for another refund of
	// the same payment (keys like "refund-<order>"), whose first create meets
	// a plain 500 (nothing refunded), finds the first use's Refund from months
	// ago on its retry and adopts it: the old refund row holds that Stripe id,
	// so the record fails (500 on every retry, for ever), or, were it
	// recorded, the client is told refunded with nothing refunded.
	t.Run("RefundKeyReusedAfterItsTombstoneExpiredNeverAdoptsTheOldRefund", func(t *testing.T) {
		t.Parallel()
		em := startSkewedEmulator(t, stripefake.Options{})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em.Emulator, Workers: quietCompleter})

		em.setOffset(-91 * 24 * time.Hour)
		p := paid(t, svc, bundle.apiKey, "order-7")
		first := postRefund(t, svc, bundle.apiKey, "refund-order-7", p.ID, `{"amount": 500}`)
		require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
		expireKey(t, svc, "refund-order-7")
		em.setOffset(0)

		em.Inject(stripefake.Fault{Kind: stripefake.Fault500})
		requireProblem(t, postRefund(t, svc, bundle.apiKey, "refund-order-7", p.ID, `{"amount": 500}`), http.StatusServiceUnavailable, "processor-unavailable")
		retry := postRefund(t, svc, bundle.apiKey, "refund-order-7", p.ID, `{"amount": 500}`)
		require.Equal(t, http.StatusCreated, retry.Status, "body: %s", retry.Body)
		require.Len(t, em.Refunds(), 2, "the second refund must be made, not the first one's adopted")
	})
}

// ageKey moves a key's recorded creation back by d: the database's record
// of d having passed since it was made. Its last run stays recent, so the
// (quiet) completer leaves it to the test.
func ageKey(t *testing.T, svc *testutil.Service, key string, d time.Duration) {
	t.Helper()
	_, err := svc.Pool.Exec(context.Background(), `UPDATE idempotency_keys
		SET created_at = created_at - $2::interval
		WHERE idempotency_key = $1`, key, d.String())
	require.NoError(t, err)
	_, err = svc.Pool.Exec(context.Background(), `UPDATE payments
		SET created_at = created_at - $2::interval, charge_attempt_at = charge_attempt_at - $2::interval
		WHERE idempotency_key_id = (SELECT id FROM idempotency_keys WHERE idempotency_key = $1)`, key, d.String())
	require.NoError(t, err)
}

// chargedADayAgo makes key's first send, 26 hours ago in Stripe's clock and
// in the database's record, the indeterminate 500 that did charge; then
// nothing ran the key until now (lookups failing through a Stripe incident,
// every server down, a busy account's reconcile list too long all day).
func chargedADayAgo(t *testing.T, em *skewedEmulator, svc *testutil.Service, apiKey, key string) {
	t.Helper()
	em.setOffset(-26 * time.Hour)
	em.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged})
	requireProblem(t, svc.PostPayment(t, apiKey, key, visa), http.StatusServiceUnavailable, "processor-unavailable")
	em.setOffset(0)
	require.Len(t, em.PaymentIntents(), 1, "the 500 did charge")
	ageKey(t, svc, key, 26*time.Hour)
	// Another payment today: the charger measures Stripe's clock as it is
	// now (the skew it measured 26 h "ago" would move the lookup's window
	// back by a day and hide the defect).
	paid(t, svc, apiKey, key+"-today")
}

// chargeOf is the id of the emulator's oldest PaymentIntent.
func chargeOf(t *testing.T, em *skewedEmulator) string {
	t.Helper()
	pis := em.PaymentIntents()
	require.NotEmpty(t, pis)
	oldest := pis[0]
	for _, pi := range pis {
		if pi.Created.Before(oldest.Created) {
			oldest = pi
		}
	}
	return oldest.ID
}

// expireKey ages a finished key past retention, reaps it (leaving its
// tombstone), then ages the tombstone past its own retention and deletes it:
// what 90-odd days of the reaper do. The key is then "a new key again".
func expireKey(t *testing.T, svc *testutil.Service, key string) {
	t.Helper()
	ctx := context.Background()
	_, err := svc.Pool.Exec(ctx, "UPDATE idempotency_keys SET finished_at = now() - interval '2 days' WHERE idempotency_key = $1", key)
	require.NoError(t, err)
	reaper := &workers.ReaperWorker{Pool: svc.Pool, Config: workers.ReaperConfig{Retention: 24 * time.Hour}, Log: testutil.Logger(t)}
	reaped, err := reaper.RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, reaped)
	_, err = svc.Pool.Exec(ctx, "UPDATE idempotency_key_tombstones SET reaped_at = now() - interval '91 days' WHERE idempotency_key = $1", key)
	require.NoError(t, err)
	_, err = reaper.RunOnce(ctx)
	require.NoError(t, err)
	var left int
	require.NoError(t, svc.Pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_key_tombstones WHERE idempotency_key = $1", key).Scan(&left))
	require.Zero(t, left, "the tombstone has expired: the key is new again")
}
