package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestPayments covers POST /payments and GET /payments/{id}: what a payment
// is made of, and what its answer says.
func TestPayments(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		userID int64
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		svc := testutil.StartService(t, testutil.ServiceOptions{})
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, userID: userID}
	}

	t.Run("CreatePayment", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		resp := svc.PostPayment(t, bundle.apiKey, "order-1", visa)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		p := decode[payment](t, resp)
		require.Equal(t, int64(2000), p.Amount)
		require.Equal(t, "usd", p.Currency)
		require.Equal(t, "succeeded", p.Status)
		require.NotNil(t, p.StripePaymentIntentID)
		require.True(t, strings.HasPrefix(*p.StripePaymentIntentID, "pi_"))
		require.Equal(t, "order 1", *p.Description)
		require.Equal(t, "/payments/"+p.ID, resp.Header.Get("Location"))
		require.Empty(t, resp.Header.Get("Idempotent-Replayed"))

		got := svc.Do(t, http.MethodGet, resp.Header.Get("Location"), "", "Authorization", "Bearer "+bundle.apiKey)
		require.Equal(t, http.StatusOK, got.Status)
		require.JSONEq(t, string(resp.Body), string(got.Body))

		pis := svc.Stripe.PaymentIntents()
		require.Len(t, pis, 1)
		require.Equal(t, *p.StripePaymentIntentID, pis[0].ID)
		// The PaymentIntent names the client's intent, not a database sequence.
		var namespace string
		require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT namespace::text FROM deployment").Scan(&namespace))
		require.Equal(t, namespace, pis[0].Metadata[intent.MetadataNamespace])
		require.Equal(t, itoa(bundle.userID), pis[0].Metadata[intent.MetadataUserID])
		require.Len(t, pis[0].Metadata[intent.MetadataIntent], 32)
		require.NotContains(t, pis[0].Metadata, "payment_id")
		require.Equal(t, "paymentsd-pi-"+pis[0].Metadata[intent.MetadataIntent]+"-1", pis[0].IdempotencyKey)

		// Each phase audited what it did, in its own transaction.
		rows, err := svc.Pool.Query(context.Background(),
			"SELECT action, data->>'status', coalesce(data->>'stripe_payment_intent_id', '') FROM audit_records WHERE resource_id = $1 ORDER BY id", rowID(t, svc, p.ID))
		require.NoError(t, err)
		var audit []string
		for rows.Next() {
			var action, status, pi string
			require.NoError(t, rows.Scan(&action, &status, &pi))
			audit = append(audit, action+" "+status+" "+pi)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{"payment.created pending ", "payment.succeeded succeeded " + *p.StripePaymentIntentID}, audit)
	})

	t.Run("NullDescriptionIsNoDescription", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		const (
			withNull = `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","description":null}`
			without  = `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`
		)

		// Either way round: the retry is a replay, not a 422.
		for key, bodies := range map[string][2]string{"null-first": {withNull, without}, "absent-first": {without, withNull}} {
			first := svc.PostPayment(t, bundle.apiKey, key, bodies[0])
			require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
			retry := svc.PostPayment(t, bundle.apiKey, key, bodies[1])
			require.Equal(t, http.StatusCreated, retry.Status, "%s: %s", key, retry.Body)
			require.Equal(t, "true", retry.Header.Get("Idempotent-Replayed"))
			require.Equal(t, string(first.Body), string(retry.Body))
		}
		require.Len(t, svc.Stripe.PaymentIntents(), 2)

		// An empty description is a description.
		resp := svc.PostPayment(t, bundle.apiKey, "null-first", strings.Replace(withNull, "null", `""`, 1))
		requireProblem(t, resp, http.StatusUnprocessableEntity, "idempotency-key-reused")
	})

	t.Run("UsersAreIndependent", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		alice := bundle.apiKey
		_, bob := svc.NewUser(t)

		a := svc.PostPayment(t, alice, "shared-key", visa)
		b := svc.PostPayment(t, bob, "shared-key", strings.Replace(visa, "2000", "3000", 1))
		require.Equal(t, http.StatusCreated, a.Status)
		require.Equal(t, http.StatusCreated, b.Status, "body: %s", b.Body)
		require.Empty(t, b.Header.Get("Idempotent-Replayed"))
		require.NotEqual(t, decode[payment](t, a).ID, decode[payment](t, b).ID)
		require.Len(t, svc.Stripe.PaymentIntents(), 2)

		// Bob cannot see Alice's payment: 404, as for a payment that does not exist.
		requireProblem(t, svc.Do(t, http.MethodGet, a.Header.Get("Location"), "", "Authorization", "Bearer "+bob),
			http.StatusNotFound, "not-found")
		requireProblem(t, svc.Do(t, http.MethodGet, "/payments/999999", "", "Authorization", "Bearer "+bob),
			http.StatusNotFound, "not-found")
	})

	t.Run("DeclineIsStoredAndReplayed", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		body := `{"amount": 500, "currency": "eur", "payment_method": "pm_card_chargeDeclined"}`

		first := svc.PostPayment(t, bundle.apiKey, "declined", body)
		p := requireProblem(t, first, http.StatusPaymentRequired, "card-declined")
		require.Equal(t, "generic_decline", p.DeclineCode)
		require.NotZero(t, p.PaymentID)

		second := svc.PostPayment(t, bundle.apiKey, "declined", body)
		require.Equal(t, http.StatusPaymentRequired, second.Status)
		require.Equal(t, "true", second.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(first.Body), string(second.Body))
		require.EqualValues(t, 1, svc.Stripe.Stats().CreateRequests)

		stored := svc.Do(t, http.MethodGet, "/payments/"+p.PaymentID, "", "Authorization", "Bearer "+bundle.apiKey)
		require.Equal(t, "failed", decode[payment](t, stored).Status)
		var failureCode string
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT data->>'failure_code' FROM audit_records WHERE resource_id = $1 AND action = 'payment.failed'", rowID(t, svc, p.PaymentID)).Scan(&failureCode))
		require.Equal(t, "generic_decline", failureCode)
	})

	t.Run("UnknownPaymentMethodIsADefiniteRejection", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		body := `{"amount": 500, "currency": "usd", "payment_method": "pm_no_such_method"}`

		first := svc.PostPayment(t, bundle.apiKey, "rejected", body)
		requireProblem(t, first, http.StatusBadRequest, "payment-rejected")
		second := svc.PostPayment(t, bundle.apiKey, "rejected", body)
		require.Equal(t, "true", second.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(first.Body), string(second.Body))
		require.Empty(t, svc.Stripe.PaymentIntents())
	})
}
