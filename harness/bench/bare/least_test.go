package bare

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestLeastDoesTheJob sends one payment to the service and one to the bare
// service over the least SQL, on one database and one emulator: the least
// answers as the service does, leaves the key finished at the point its
// transactions reached, the payment with its outcome, two audit records and
// one staged job, all in its own schema, and replays the stored answer.
func TestLeastDoesTheJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	emulator := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: emulator})
	user, apiKey := svc.NewUser(t)

	stripe := payments.NewCharger(payments.StripeConfig{SecretKey: "sk_test_paymentsd", APIBase: emulator.URL}).Client()
	s, err := NewLeast(ctx, svc.Pool.Driver(), stripe, map[string]int64{apiKey: user})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	lst := &testutil.Service{URL: srv.URL, Pool: svc.Pool, Client: srv.Client()}

	fromService := svc.PostPayment(t, apiKey, "order-1", body)
	fromLeast := lst.PostPayment(t, apiKey, "least-order-1", body)
	require.Equal(t, 201, fromService.Status, "%s", fromService.Body)
	require.Equal(t, 201, fromLeast.Status, "%s", fromLeast.Body)
	require.Equal(t, fields(t, fromService.Body), fields(t, fromLeast.Body), "the answers have the same fields")
	require.Equal(t, "/payments/"+jsonID(t, fromLeast.Body), fromLeast.Header.Get("Location"))

	var (
		point, status, pi string
		code              int32
		locked            bool
		audits            []string
		jobs              int
	)
	require.NoError(t, svc.Pool.QueryRow(ctx, `
		SELECT k.recovery_point, k.response_code, k.locked_at IS NOT NULL, p.status, p.stripe_payment_intent_id,
		       (SELECT array_agg(a.action ORDER BY a.id) FROM leastsql.audit_records AS a WHERE a.resource_id = p.id),
		       (SELECT count(*) FROM leastsql.staged_jobs AS j WHERE j.job_args->>'payment_id' = p.id::text)
		FROM leastsql.idempotency_keys AS k JOIN leastsql.payments AS p ON p.id = k.payment_id
		WHERE k.user_id = $1 AND k.idempotency_key = $2`, user, "least-order-1").
		Scan(&point, &code, &locked, &status, &pi, &audits, &jobs))
	require.Equal(t, "finished", point)
	require.EqualValues(t, 201, code)
	require.False(t, locked, "the lease is released")
	require.Equal(t, "succeeded", status)
	require.NotEmpty(t, pi)
	require.Equal(t, []string{"payment.created", "payment.succeeded"}, audits)
	require.Equal(t, 1, jobs)

	// Nothing of it is in the service's tables.
	var n int
	require.NoError(t, svc.Pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE idempotency_key = 'least-order-1'`).Scan(&n))
	require.Zero(t, n)
	// The five indexes the schema documents, and no more.
	require.NoError(t, svc.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = 'leastsql'`).Scan(&n))
	require.Equal(t, 5, n)

	// A replay answers the stored answer, byte for byte.
	again := lst.PostPayment(t, apiKey, "least-order-1", body)
	require.Equal(t, 201, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, fromLeast.Body, again.Body)
	require.Equal(t, fromLeast.Header.Get("Location"), again.Header.Get("Location"))

	// Creating the schema again, as a restarted bare does, changes nothing.
	_, err = NewLeast(ctx, svc.Pool.Driver(), stripe, map[string]int64{apiKey: user})
	require.NoError(t, err)
}
