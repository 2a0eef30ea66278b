package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestExecModes covers the service over a pool that keeps no prepared
// statements, as behind PgBouncer in transaction pooling mode.
func TestExecModes(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		em     *testutil.Emulator
	}

	// setup starts a service whose pool runs in mode, taking webhooks, with
	// the completer quiet, and makes a user of it.
	setup := func(t *testing.T, mode pgx.QueryExecMode) (*testutil.Service, *testBundle) {
		t.Helper()
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc := testutil.StartService(t, testutil.ServiceOptions{Pool: testutil.NewDBInMode(t, mode),
			Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
		_, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, em: em}
	}

	// Behind PgBouncer in transaction pooling mode pgx may not keep prepared
	// statements, and runs in exec or simple_protocol mode: it then tells
	// Postgres no parameter's type, and encodes each by its Go type alone. Every
	// flow that writes must still work so: payments and their replays, refunds,
	// webhooks, the completer, the operator's resolution and receipts.
	t.Run("FlowsWithoutPreparedStatements", func(t *testing.T) {
		t.Parallel()
		for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
			t.Run(mode.String(), func(t *testing.T) {
				t.Parallel()
				svc, bundle := setup(t, mode)

				// A payment, and its replay byte for byte.
				first := svc.PostPayment(t, bundle.apiKey, "pay", visa)
				require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
				p := decode[payment](t, first)
				replay := svc.PostPayment(t, bundle.apiKey, "pay", visa)
				require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
				require.Equal(t, string(first.Body), string(replay.Body))
				require.Equal(t, first.Header.Get("Location"), replay.Header.Get("Location"))

				// A declined payment: a stored problem, replayed.
				declined := svc.PostPayment(t, bundle.apiKey, "declined",
					`{"amount": 2000, "currency": "usd", "payment_method": "pm_card_chargeDeclined"}`)
				require.Equal(t, http.StatusPaymentRequired, declined.Status, "body: %s", declined.Body)
				require.Equal(t, string(declined.Body), string(svc.PostPayment(t, bundle.apiKey, "declined",
					`{"amount": 2000, "currency": "usd", "payment_method": "pm_card_chargeDeclined"}`).Body))

				// A refund, and its replay.
				refunded := postRefund(t, svc, bundle.apiKey, "refund", p.ID, `{"amount": 500, "reason": "requested_by_customer"}`)
				require.Equal(t, http.StatusCreated, refunded.Status, "body: %s", refunded.Body)
				require.Equal(t, string(refunded.Body), string(postRefund(t, svc, bundle.apiKey, "refund", p.ID,
					`{"amount": 500, "reason": "requested_by_customer"}`).Body))
				require.EqualValues(t, 500, getPaymentOf(t, svc, bundle.apiKey, p.ID)["amount_refunded"])

				// A webhook's effects: a dispute, and a lost answer settled.
				dispute := fmt.Sprintf(`{"id":"dp_1","object":"dispute","amount":2000,"currency":"usd","payment_intent":%q,"reason":"fraudulent","status":"needs_response"}`,
					*p.StripePaymentIntentID)
				_, payload := event("charge.dispute.created", dispute, time.Now())
				require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
				require.Equal(t, true, getPaymentOf(t, svc, bundle.apiKey, p.ID)["disputed"])
				bundle.em.Inject(stripefake.Fault{Kind: stripefake.FaultLostAnswer})
				requireProblem(t, svc.PostPayment(t, bundle.apiKey, "lost", visa), http.StatusServiceUnavailable, "processor-unavailable")
				lost := bundle.em.PaymentIntents()[len(bundle.em.PaymentIntents())-1]
				_, payload = event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+lost.ID), time.Now())
				require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)
				settled := svc.PostPayment(t, bundle.apiKey, "lost", visa)
				require.Equal(t, http.StatusCreated, settled.Status, "body: %s", settled.Body)
				require.Equal(t, "true", settled.Header.Get("Idempotent-Replayed"))

				// The completer finishes a key its client left after a 500.
				bundle.em.Inject(stripefake.Fault{Kind: stripefake.Fault500})
				requireProblem(t, svc.PostPayment(t, bundle.apiKey, "left", visa), http.StatusServiceUnavailable, "processor-unavailable")
				n, err := completer(svc).RunOnce(context.Background())
				require.NoError(t, err)
				require.Equal(t, 1, n)
				require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "left", visa).Status)

				// An operator settles a key that needs attention.
				bundle.em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
				requireProblem(t, svc.PostPayment(t, bundle.apiKey, "manual", visa), http.StatusServiceUnavailable, "needs-attention")
				resolved, err := svc.App.Resolver.Charged(context.Background(), keyID(t, svc, "manual"), plant(t, bundle.em, 2000, nil).ID)
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, resolved.Status)
				require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "manual", visa).Status)

				// Every succeeded payment's receipt is delivered.
				testutil.WaitForf(t, 10*time.Second, 20*time.Millisecond, func() bool {
					var delivered int
					require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT count(*) FROM receipts").Scan(&delivered))
					return delivered == 4
				}, "four receipts delivered")
			})
		}
	})
}
