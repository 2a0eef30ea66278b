package bare

import (
	"context"
	"encoding/json"
	"maps"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

const body = `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`

// row is what a finished payment leaves in the database, as far as the
// bare and the service must agree.
type row struct {
	Flow, Method, Path, Point string
	Code                      int32
	Headers                   map[string]string
	Status, Intent, PI        string
	Audits                    []string
}

func readRow(t *testing.T, svc *testutil.Service, user int64, key string) (row, int64) {
	t.Helper()
	var (
		r         row
		paymentID int64
	)
	err := svc.Pool.QueryRow(context.Background(), `
		SELECT k.flow, k.request_method, k.request_path, k.recovery_point, k.response_code, k.response_headers,
		       p.id, p.status, p.intent_id, p.stripe_payment_intent_id,
		       (SELECT array_agg(a.action ORDER BY a.id) FROM audit_records AS a
		        WHERE a.resource_type = 'payment' AND a.resource_id = p.id)
		FROM idempotency_keys AS k JOIN payments AS p ON p.idempotency_key_id = k.id
		WHERE k.user_id = $1 AND k.idempotency_key = $2`, user, key).
		Scan(&r.Flow, &r.Method, &r.Path, &r.Point, &r.Code, &r.Headers, &paymentID, &r.Status, &r.Intent, &r.PI, &r.Audits)
	require.NoError(t, err)
	return r, paymentID
}

// TestBareDoesWhatTheServiceDoes sends one payment to the service and one
// to the bare service, on one database and one emulator, and compares what
// each answered and left behind; then replays both and sends a key still
// in flight to the bare.
func TestBareDoesWhatTheServiceDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	emulator := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: emulator})
	user, apiKey := svc.NewUser(t)

	stripe := payments.NewCharger(payments.StripeConfig{SecretKey: "sk_test_paymentsd", APIBase: emulator.URL}).Client()
	s, err := New(ctx, svc.Pool.Driver(), stripe, map[string]int64{apiKey: user})
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	bare := &testutil.Service{URL: srv.URL, Pool: svc.Pool, Client: srv.Client()}

	fromService := svc.PostPayment(t, apiKey, "order-1", body)
	fromBare := bare.PostPayment(t, apiKey, "bare-order-1", body)
	require.Equal(t, 201, fromService.Status, "%s", fromService.Body)
	require.Equal(t, 201, fromBare.Status, "%s", fromBare.Body)

	serviceRow, servicePayment := readRow(t, svc, user, "order-1")
	bareRow, barePayment := readRow(t, svc, user, "bare-order-1")
	require.Equal(t, "/payments/"+jsonID(t, fromBare.Body), fromBare.Header.Get("Location"))
	require.Equal(t, bareRow.Headers["Location"], fromBare.Header.Get("Location"))
	in := intent.Intent{Namespace: s.namespace, UserID: user, Key: "bare-order-1"}
	require.Equal(t, in.ID(), bareRow.Intent, "the intent the service would derive")
	require.NotEmpty(t, bareRow.PI)
	// Ids and the Location differ; the rest is the same.
	serviceRow.Intent, serviceRow.PI, serviceRow.Headers["Location"] = bareRow.Intent, bareRow.PI, bareRow.Headers["Location"]
	require.Equal(t, serviceRow, bareRow)
	require.Equal(t, fields(t, fromService.Body), fields(t, fromBare.Body), "the answers have the same fields")

	// The PaymentIntent was created under the intent's first Stripe key,
	// with its metadata, as the service creates it.
	var found bool
	for _, pi := range emulator.PaymentIntents() {
		if pi.ID == bareRow.PI {
			found = true
			require.Equal(t, in.Metadata(), pi.Metadata)
			require.EqualValues(t, 2000, pi.Amount)
		}
	}
	require.True(t, found, "PaymentIntent %s at the emulator", bareRow.PI)
	require.NotEqual(t, servicePayment, barePayment)

	// The receipt went to the outbox in the same transaction.
	var receipts int
	require.NoError(t, svc.Pool.QueryRow(ctx, `SELECT count(*) FROM receipt_outbox WHERE payment_id = $1 AND run_at > now() + interval '99 years'`,
		barePayment).Scan(&receipts))
	require.Equal(t, 1, receipts)
	// The service's dispatcher delivers the service's receipt, never the
	// bare's.
	testutil.WaitFor(t, 10*time.Second, 20*time.Millisecond, func() bool {
		var n int
		require.NoError(t, svc.Pool.QueryRow(ctx, `SELECT count(*) FROM receipts WHERE payment_id = $1`, servicePayment).Scan(&n))
		return n == 1
	})
	require.NoError(t, svc.Pool.QueryRow(ctx, `SELECT count(*) FROM receipts WHERE payment_id = $1`, barePayment).Scan(&receipts))
	require.Zero(t, receipts)

	// A replay answers the stored answer, byte for byte.
	again := bare.PostPayment(t, apiKey, "bare-order-1", body)
	require.Equal(t, 201, again.Status)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	require.Equal(t, fromBare.Body, again.Body)
	require.Equal(t, fromBare.Header.Get("Location"), again.Header.Get("Location"))

	// A refund the service made replays through the bare too, at its own
	// path; a refund it does not know it does not make.
	refundPath := "/payments/" + jsonID(t, fromService.Body) + "/refunds"
	refund := svc.Do(t, "POST", refundPath, `{"amount":500}`,
		"Authorization", "Bearer "+apiKey, "Idempotency-Key", "refund-1", "Content-Type", "application/json")
	require.Equal(t, 201, refund.Status, "%s", refund.Body)
	refundAgain := bare.Do(t, "POST", refundPath, `{"amount":500}`,
		"Authorization", "Bearer "+apiKey, "Idempotency-Key", "refund-1", "Content-Type", "application/json")
	require.Equal(t, 201, refundAgain.Status)
	require.Equal(t, "true", refundAgain.Header.Get("Idempotent-Replayed"))
	require.Equal(t, refund.Body, refundAgain.Body)
	require.Equal(t, 404, bare.Do(t, "POST", refundPath, `{"amount":500}`,
		"Authorization", "Bearer "+apiKey, "Idempotency-Key", "refund-2", "Content-Type", "application/json").Status)

	// A key in flight is a 409.
	_, err = svc.Pool.Exec(ctx, `UPDATE idempotency_keys SET recovery_point = 'payment_created', finished_at = NULL,
		response_code = NULL, response_body = NULL, response_headers = NULL WHERE user_id = $1 AND idempotency_key = 'bare-order-1'`, user)
	require.NoError(t, err)
	require.Equal(t, 409, bare.PostPayment(t, apiKey, "bare-order-1", body).Status)

	// An unknown API key is a 401.
	require.Equal(t, 401, bare.PostPayment(t, "nope", "bare-order-2", body).Status)
}

func fields(t *testing.T, body []byte) []string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	return slices.Sorted(maps.Keys(m))
}

func jsonID(t *testing.T, body []byte) string {
	t.Helper()
	var v struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(body, &v))
	return v.ID
}
