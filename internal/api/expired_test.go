package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// TestExpiredKeys covers keys the reaper took: a retry of one is refused,
// as the document says.
func TestExpiredKeys(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		userID int64
	}

	// setup starts a service whose exchanges are checked against
	// api/openapi.yaml (newContract), and makes a user of it.
	setup := func(t *testing.T) (*contract, *testBundle) {
		t.Helper()
		c := newContract(t)
		userID, apiKey := c.svc.NewUser(t)
		return c, &testBundle{apiKey: apiKey, userID: userID}
	}

	// Keys retried after the reaper took them: each retry is refused with a
	// documented 422 that names the original payment, and nothing is charged
	// or created again.
	t.Run("LateRetryAfterReapingIsRefused", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		c, bundle := setup(t)
		svc := c.svc
		_, otherKey := svc.NewUser(t)
		const declined = `{"amount": 500, "currency": "eur", "payment_method": "pm_card_chargeDeclined"}`

		created := decode[payment](t, c.run(t, post(bundle.apiKey, "late", visa).want(http.StatusCreated)))
		declinedID := decode[problemBody](t, c.run(t, post(bundle.apiKey, "late-declined", declined).want(http.StatusPaymentRequired))).PaymentID
		require.NotZero(t, declinedID)

		// Both keys age past retention, and the reaper takes them.
		_, err := svc.Pool.Exec(ctx, "UPDATE idempotency_keys SET finished_at = now() - interval '2 days'")
		require.NoError(t, err)
		reaper := &workers.ReaperWorker{Pool: svc.Pool, Config: workers.ReaperConfig{Retention: 24 * time.Hour}, Log: testutil.Logger(t)}
		reaped, err := reaper.RunOnce(ctx)
		require.NoError(t, err)
		require.EqualValues(t, 2, reaped)
		creates := svc.Stripe.Stats().CreateRequests

		// The same request, twice: refused, naming the payment it made.
		for range 2 {
			resp := c.run(t, post(bundle.apiKey, "late", visa).want(http.StatusUnprocessableEntity))
			p := requireProblem(t, resp, http.StatusUnprocessableEntity, "idempotency-key-expired")
			require.Equal(t, created.ID, p.PaymentID)
			require.Contains(t, p.Detail, "never run again")
			require.Empty(t, resp.Header.Get("Retry-After"), "a client error, not to be retried")
			require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
		}
		// A decline made a (failed) payment too.
		resp := c.run(t, post(bundle.apiKey, "late-declined", declined).want(http.StatusUnprocessableEntity))
		require.Equal(t, declinedID, requireProblem(t, resp, http.StatusUnprocessableEntity, "idempotency-key-expired").PaymentID)
		// Another request with the expired key is refused as well.
		resp = c.run(t, post(bundle.apiKey, "late", strings.Replace(visa, "2000", "2001", 1)).want(http.StatusUnprocessableEntity))
		p := requireProblem(t, resp, http.StatusUnprocessableEntity, "idempotency-key-expired")
		require.Equal(t, created.ID, p.PaymentID)
		require.Contains(t, p.Detail, "different request")

		require.Equal(t, creates, svc.Stripe.Stats().CreateRequests, "no second Stripe call")
		require.Len(t, svc.Stripe.PaymentIntents(), 2)
		var payments, keys int
		require.NoError(t, svc.Pool.QueryRow(ctx, "SELECT count(*) FROM payments WHERE user_id = $1", bundle.userID).Scan(&payments))
		require.NoError(t, svc.Pool.QueryRow(ctx, "SELECT count(*) FROM idempotency_keys WHERE user_id = $1", bundle.userID).Scan(&keys))
		require.Equal(t, 2, payments, "no second payment")
		require.Zero(t, keys, "a refused key is not stored")
		c.run(t, get("/payments/"+created.ID, bundle.apiKey).want(http.StatusOK))

		// Tombstones are per user: another user's key of the same name is new.
		c.run(t, post(otherKey, "late", visa).want(http.StatusCreated))
	})

	// A reaped key's tombstone keeps the prefix of the id it names, and a
	// retry is told that id: a payment's pay_…, a refund's re_…. Tombstones
	// reaped before they kept it (migration 00031) answer the same ids.
	t.Run("ARetryIsToldTheIDTheClientSaw", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		c, bundle := setup(t)
		svc := c.svc

		p := decode[payment](t, c.run(t, post(bundle.apiKey, "pay", visa).want(http.StatusCreated)))
		created := postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 500}`)
		require.Equal(t, http.StatusCreated, created.Status, "body: %s", created.Body)
		r := decode[refund](t, created)

		reapKeys(t, svc, 2)
		var prefixes []string
		require.NoError(t, svc.Pool.QueryRow(ctx,
			"SELECT array_agg(resource_type || ' ' || resource_prefix ORDER BY resource_type) FROM idempotency_key_tombstones").Scan(&prefixes))
		require.Equal(t, []string{"payment pay", "refund re"}, prefixes)

		for _, reapedBefore00031 := range []bool{false, true} {
			if reapedBefore00031 {
				_, err := svc.Pool.Exec(ctx, "UPDATE idempotency_key_tombstones SET resource_prefix = NULL")
				require.NoError(t, err)
			}
			resp := c.run(t, post(bundle.apiKey, "pay", visa).want(http.StatusUnprocessableEntity))
			require.Equal(t, p.ID, requireProblem(t, resp, http.StatusUnprocessableEntity, "idempotency-key-expired").PaymentID)
			resp = postRefund(t, svc, bundle.apiKey, "back", p.ID, `{"amount": 500}`)
			requireProblem(t, resp, http.StatusUnprocessableEntity, "idempotency-key-expired")
			require.Equal(t, r.ID, decode[struct {
				RefundID string `json:"refund_id"`
			}](t, resp).RefundID)
		}
	})
}
