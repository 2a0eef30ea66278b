package api_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestPublicIDs covers the ids clients hold: pay_ and re_ ids, the numbers
// of rows made before them, and ids never handed out twice.
func TestPublicIDs(t *testing.T) {
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

	// Payments and refunds made before public ids keep working after
	// migration 00021: their stored answers replay as stored, with their
	// integers, and the API still finds them by those integers, while showing
	// their new pay_/re_ ids; lists keep their order across the change.
	t.Run("RowsMadeBeforePublicIDsKeepTheirNumbers", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		// Direct even in the pooled pass: the test migrates, and goose's
		// session lock needs one server connection from lock to unlock,
		// which transaction pooling does not promise (migrate is
		// documented as needing a direct connection).
		pool := testutil.NewDirectDBWith(t, nil)
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Pool: pool, Emulator: em, Workers: quietCompleter})
		require.NoError(t, svc.Stop())

		provider, sqlDB, err := db.Migrator(pool)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sqlDB.Close() })
		_, err = provider.DownTo(ctx, 20)
		require.NoError(t, err)
		pi := plant(t, em, 2000, nil)
		stored := `{"id":41,"amount":2000,"currency":"usd","status":"succeeded","stripe_payment_intent_id":"` + pi.ID + `","description":null,"amount_refunded":0,"disputed":false,"created_at":"2026-01-02T03:04:05Z"}` + "\n"
		_, fingerprint, err := idempotency.Fingerprint(http.MethodPost, "/payments",
			[]byte(`{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`))
		require.NoError(t, err)
		for _, stmt := range []string{
			`INSERT INTO idempotency_keys (id, user_id, idempotency_key, flow, request_method, request_path, request_params,
			    request_fingerprint, recovery_point, response_code, response_headers, response_body, finished_at, created_at)
			VALUES (900, $1, 'legacy', 'payment', 'POST', '/payments',
			    '{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}', $3, 'finished',
			    201, '{"Content-Type":"application/json","Location":"/payments/41"}', convert_to($2, 'UTF8'), now(), '2026-01-02T03:04:05Z')`,
			`INSERT INTO payments (id, user_id, idempotency_key_id, amount, currency, payment_method, status,
			    stripe_payment_intent_id, created_at, amount_refunded, amount_reserved)
			VALUES (41, $1, 900, 2000, 'usd', 'pm_card_visa', 'succeeded', $2, '2026-01-02T03:04:05Z', 500, 500)`,
			`INSERT INTO refunds (id, user_id, payment_id, amount, currency, status, stripe_refund_id, created_at)
			VALUES (7, $1, 41, 500, 'usd', 'succeeded', 're_legacy', '2026-01-03T03:04:05Z')`,
		} {
			args := []any{bundle.userID}
			switch {
			case strings.Contains(stmt, "$3"):
				args = append(args, stored, fingerprint)
			case strings.Contains(stmt, "$2"):
				args = append(args, pi.ID)
			}
			_, err = pool.Exec(ctx, stmt, args...)
			require.NoError(t, err)
		}
		_, err = provider.Up(ctx)
		require.NoError(t, err)

		svc = testutil.StartService(t, testutil.ServiceOptions{Pool: pool, Emulator: em, Workers: quietCompleter})
		auth := "Bearer " + bundle.apiKey
		replay := svc.Do(t, http.MethodPost, "/payments", `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`,
			"Authorization", auth, "Idempotency-Key", "legacy", "Content-Type", "application/json")
		require.Equal(t, http.StatusCreated, replay.Status, "body: %s", replay.Body)
		require.Equal(t, stored, string(replay.Body), "replayed as stored")
		require.Equal(t, "/payments/41", replay.Header.Get("Location"))

		got := decode[payment](t, svc.Do(t, http.MethodGet, "/payments/41", "", "Authorization", auth))
		require.Regexp(t, `^pay_[0-9a-hjkmnp-tv-z]{26}$`, got.ID)
		require.Equal(t, pi.ID, *got.StripePaymentIntentID)
		require.Equal(t, got, decode[payment](t, svc.Do(t, http.MethodGet, "/payments/"+got.ID, "", "Authorization", auth)))
		legacyRefund := decode[refund](t, svc.Do(t, http.MethodGet, "/refunds/7", "", "Authorization", auth))
		require.Regexp(t, `^re_[0-9a-hjkmnp-tv-z]{26}$`, legacyRefund.ID)
		require.Equal(t, got.ID, legacyRefund.PaymentID)

		// A refund by the old number, stored with it, and its replay.
		made := postRefund(t, svc, bundle.apiKey, "by-number", "41", `{"amount": 300}`)
		require.Equal(t, http.StatusCreated, made.Status, "body: %s", made.Body)
		require.Equal(t, got.ID, decode[refund](t, made).PaymentID)
		again := postRefund(t, svc, bundle.apiKey, "by-number", "41", `{"amount": 300}`)
		require.Equal(t, string(made.Body), string(again.Body))
		// Another user's number is nobody's.
		_, otherKey := svc.NewUser(t)
		requireProblem(t, svc.Do(t, http.MethodGet, "/payments/41", "", "Authorization", "Bearer "+otherKey), http.StatusNotFound, "not-found")

		// A payment made now has no number, and lists after the old one.
		fresh := paid(t, svc, bundle.apiKey, "fresh")
		var legacyID *int64
		public, err := ids.Parse(ids.Payment, fresh.ID)
		require.NoError(t, err)
		require.NoError(t, pool.QueryRow(ctx, "SELECT legacy_id FROM payments WHERE public_id = $1", public).Scan(&legacyID))
		require.Nil(t, legacyID)
		requireProblem(t, svc.Do(t, http.MethodGet, "/payments/"+strconv.FormatInt(rowID(t, svc, fresh.ID), 10), "", "Authorization", auth),
			http.StatusNotFound, "not-found")
		type page struct {
			Data []payment `json:"data"`
		}
		list := decode[page](t, svc.Do(t, http.MethodGet, "/payments", "", "Authorization", auth))
		require.Len(t, list.Data, 2)
		require.Equal(t, []string{fresh.ID, got.ID}, []string{list.Data[0].ID, list.Data[1].ID}, "newest first")
	})

	// Finding 5 of issue 25: ids came from sequences, so a restore that rewinds
	// them (a dump, a snapshot, commits lost in a failover) handed an id a
	// client already held to another payment, and a client holding it read,
	// or refunded, someone else's payment by it. A restored database now
	// never hands a held id out again.
	t.Run("ARestoredDatabaseNeverHandsAHeldIDOutAgain", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setupWith(t, testutil.ServiceOptions{Workers: quietCompleter})
		var before int64
		var called bool
		require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT last_value, is_called FROM payments_id_seq").Scan(&before, &called))
		held := paid(t, svc, bundle.apiKey, "held")

		// Restored to before the payment: its rows, and the sequence's value.
		forgetEverything(t, svc)
		_, err := svc.Pool.Exec(context.Background(), "SELECT setval('payments_id_seq', $1, $2)", before, called)
		require.NoError(t, err)
		_, otherKey := svc.NewUser(t)
		other := paid(t, svc, otherKey, "someone-else")

		require.NotEqual(t, held.ID, other.ID)
		requireProblem(t, svc.Do(t, http.MethodGet, "/payments/"+held.ID, "", "Authorization", "Bearer "+bundle.apiKey),
			http.StatusNotFound, "not-found")
	})
}
