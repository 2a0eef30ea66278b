package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// These tests hold the charge path to what Stripe documents, not to what a
// kind emulator would let pass: a 500 may have charged, search lags writes,
// a request outlives its client, and other databases share the account.

// TestUnknownOutcome covers charges whose outcome the service does not know
// at once: it learns it from Stripe, or parks the key for an operator, and
// never charges twice.
func TestUnknownOutcome(t *testing.T) {
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

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		return setupWith(t, testutil.ServiceOptions{})
	}

	// Defect: after a replayed 500 the charger searched once, found nothing
	// (the index lags) and charged again under the next Stripe key.
	t.Run("Indeterminate500ThatChargedIsAdoptedWhileSearchLags", func(t *testing.T) {
		t.Parallel()
		em := testutil.StartEmulator(t, stripefake.Options{SearchLag: time.Hour})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em})
		em.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged})

		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "charged-500", visa), http.StatusServiceUnavailable, "processor-unavailable")
		require.Len(t, em.PaymentIntents(), 1, "the 500 did charge")

		resp := svc.PostPayment(t, bundle.apiKey, "charged-500", visa)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		pis := em.PaymentIntents()
		require.Len(t, pis, 1, "adopted, not charged again")
		require.Equal(t, pis[0].ID, *decode[payment](t, resp).StripePaymentIntentID)
	})

	// Defect: a create sent just before Stripe's window closed was still
	// executing when the lookup just after found nothing, and the key was
	// settled "not attempted" while the card was charged.
	t.Run("NoCreateNearTheWindowsEndAndNotChargedOnlyWhenProven", func(t *testing.T) {
		t.Parallel()
		em := testutil.StartEmulator(t, stripefake.Options{})
		svc, bundle := setupWith(t, testutil.ServiceOptions{
			Emulator: em, StripeTimeout: 300 * time.Millisecond,
			Stripe: payments.StripeConfig{ExecutionBound: 2 * time.Second, VisibilityMargin: 100 * time.Millisecond},
		})
		em.Inject(stripefake.Fault{Kind: stripefake.Fault500})
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", visa), http.StatusServiceUnavailable, "processor-unavailable")

		// The key is now one second short of Stripe's 24 hours: past the last
		// moment a create may be sent (the window less the execution bound and
		// the margin). A create sent now would outlive its client by 1.5 s.
		_, err := svc.Pool.Exec(context.Background(),
			"UPDATE idempotency_keys SET created_at = now() - interval '24 hours' + interval '1 second' WHERE idempotency_key = 'late'")
		require.NoError(t, err)
		em.Inject(stripefake.Fault{Kind: stripefake.FaultOutliveClient, Latency: 1500 * time.Millisecond})
		requests := em.Stats().CreateRequests

		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "late", visa), http.StatusServiceUnavailable, "processor-unavailable")
		time.Sleep(1200 * time.Millisecond) // past the window's end
		settled := svc.PostPayment(t, bundle.apiKey, "late", visa)
		require.Equal(t, http.StatusBadRequest, settled.Status, "body: %s", settled.Body)
		require.Contains(t, string(settled.Body), `"processor_code":"not_charged"`)

		time.Sleep(1500 * time.Millisecond) // anything still executing has finished
		require.Equal(t, requests, em.Stats().CreateRequests, "no create was sent near the window's end")
		require.Empty(t, em.PaymentIntents(), "settled as not charged, and nothing was")
	})

	// Defect: Stripe keys and metadata came from payments.id, so two databases
	// on one Stripe account sent the same keys and recorded each other's
	// PaymentIntents.
	t.Run("TwoDatabasesOnOneStripeAccount", func(t *testing.T) {
		t.Parallel()
		em := testutil.StartEmulator(t, stripefake.Options{})
		prod, prodBundle := setupWith(t, testutil.ServiceOptions{Emulator: em})
		staging, stagingBundle := setupWith(t, testutil.ServiceOptions{Emulator: em})
		require.Equal(t, prodBundle.userID, stagingBundle.userID, "the same user id in both databases")

		a := prod.PostPayment(t, prodBundle.apiKey, "order-1", visa)
		b := staging.PostPayment(t, stagingBundle.apiKey, "order-1", visa)
		require.Equal(t, http.StatusCreated, a.Status, "body: %s", a.Body)
		require.Equal(t, http.StatusCreated, b.Status, "body: %s", b.Body)
		require.Empty(t, b.Header.Get("Idempotent-Replayed"))

		pis := em.PaymentIntents()
		require.Len(t, pis, 2, "each database charged its own payment")
		require.NotEqual(t, *decode[payment](t, a).StripePaymentIntentID, *decode[payment](t, b).StripePaymentIntentID)
		byID := map[string]stripefake.PaymentIntent{pis[0].ID: pis[0], pis[1].ID: pis[1]}
		require.Equal(t, namespaceOf(t, prod).String(), byID[*decode[payment](t, a).StripePaymentIntentID].Metadata[intent.MetadataNamespace])
		require.Equal(t, namespaceOf(t, staging).String(), byID[*decode[payment](t, b).StripePaymentIntentID].Metadata[intent.MetadataNamespace])
	})

	// Defect: after a failover lost a key's commits, the retry made a new
	// payment id, so a new Stripe key, and charged again.
	t.Run("RetryAfterLostCommitsGetsStripesCachedAnswer", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		first := svc.PostPayment(t, bundle.apiKey, "lost", visa)
		require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)

		// The database forgets everything the request committed, in one
		// transaction, retried if the receipt dispatcher's own deadlocks with it.
		require.NoError(t, db.WithTx(context.Background(), svc.Pool, func(ctx context.Context, tx db.Tx) error {
			_, err := tx.Exec(ctx, `
				DELETE FROM receipt_outbox;
				DELETE FROM receipts;
				DELETE FROM payments;
				DELETE FROM audit_records;
				DELETE FROM idempotency_keys;`)
			return err
		}))

		retry := svc.PostPayment(t, bundle.apiKey, "lost", visa)
		require.Equal(t, http.StatusCreated, retry.Status, "body: %s", retry.Body)
		require.Len(t, svc.Stripe.PaymentIntents(), 1, "Stripe replayed the charge; nothing was charged twice")
		require.Equal(t, *decode[payment](t, first).StripePaymentIntentID, *decode[payment](t, retry).StripePaymentIntentID)
		require.EqualValues(t, 1, svc.Stripe.Stats().Replays)
	})

	// Defect: an idempotency_error was taken for a transient failure and
	// answered 503 for ever; it can never succeed, so an operator must settle it.
	t.Run("IdempotencyErrorNeedsAnOperator", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})

		resp := svc.PostPayment(t, bundle.apiKey, "refused", visa)
		p := requireProblem(t, resp, http.StatusServiceUnavailable, "needs-attention")
		require.Contains(t, p.Detail, "operator")
		require.NotEmpty(t, resp.Header.Get("Retry-After"))
		requests := svc.Stripe.Stats().CreateRequests

		// Never run again automatically: not by a retry, not by the completer.
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "refused", visa), http.StatusServiceUnavailable, "needs-attention")
		resumed, err := completer(svc).RunOnce(context.Background())
		require.NoError(t, err)
		require.Zero(t, resumed)
		require.Equal(t, requests, svc.Stripe.Stats().CreateRequests)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 1")

		// The operator finds nothing was charged; the key answers that from now on.
		id := keyID(t, svc, "refused")
		settled, err := svc.App.Resolver.NotCharged(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, http.StatusBadRequest, settled.Status)
		replay := svc.PostPayment(t, bundle.apiKey, "refused", visa)
		requireProblem(t, replay, http.StatusBadRequest, "payment-rejected")
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(settled.Body), string(replay.Body))
		var audits int
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM audit_records WHERE action = 'payment.resolved' AND data->>'as' = 'not_charged'").Scan(&audits))
		require.Equal(t, 1, audits)
		requireMetric(t, svc, "paymentsd_keys_needing_attention 0")
	})

	// Defect: adoption checked neither amount, currency nor owner. Now a
	// PaymentIntent of the intent for another amount, or two of them, park the
	// key instead of being adopted or charged around.
	t.Run("LookupNeverAdoptsAMismatchOrChoosesBetweenTwo", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name    string
			amounts []int64
			reason  string
		}{
			{"another amount", []int64{999}, "not 2000 usd"},
			{"two of them", []int64{2000, 2000}, "more than one PaymentIntent"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				em := testutil.StartEmulator(t, stripefake.Options{})
				svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: em})
				em.Inject(stripefake.Fault{Kind: stripefake.Fault500})
				requireProblem(t, svc.PostPayment(t, bundle.apiKey, "odd", visa), http.StatusServiceUnavailable, "processor-unavailable")

				in := intent.Intent{Namespace: namespaceOf(t, svc), UserID: bundle.userID, Key: "odd"}
				for _, amount := range tc.amounts {
					plant(t, em, amount, in.Metadata())
				}
				requireProblem(t, svc.PostPayment(t, bundle.apiKey, "odd", visa), http.StatusServiceUnavailable, "needs-attention")
				require.Len(t, em.PaymentIntents(), len(tc.amounts), "nothing adopted, nothing charged")
				var lastError string
				require.NoError(t, svc.Pool.QueryRow(context.Background(),
					"SELECT last_error FROM idempotency_keys WHERE needs_attention_at IS NOT NULL").Scan(&lastError))
				require.Contains(t, lastError, tc.reason)
			})
		}
	})

	// Defect: a create answered with a PaymentIntent in status "processing"
	// (Stripe documents it for every payment method: quick for cards, days for
	// others; the final status comes later, by webhook or retrieve) is recorded
	// as a decline: the payment is stored "failed", the client gets a stored 402
	// card-declined, replayed for ever, and is invited to pay again with a new
	// key, while the PaymentIntent goes on to succeed. The lookup path treats
	// the very same status as "not final yet"; the create path must too.
	t.Run("AProcessingPaymentIntentIsNeverRecordedAsDeclined", func(t *testing.T) {
		t.Parallel()
		em := testutil.StartEmulator(t, stripefake.Options{})
		var once atomic.Bool
		front := rewritingProxy(t, em, func(body []byte) []byte {
			if once.CompareAndSwap(false, true) {
				return bytes.Replace(body, []byte(`"status":"succeeded"`), []byte(`"status":"processing"`), 1)
			}
			return body
		})
		svc, bundle := setupWith(t, testutil.ServiceOptions{Emulator: front, Workers: quietCompleter})

		resp := svc.PostPayment(t, bundle.apiKey, "processing", visa)
		pis := em.PaymentIntents()
		require.Len(t, pis, 1)
		require.Equal(t, "succeeded", pis[0].Status, "the money moved")
		require.NotEqual(t, http.StatusPaymentRequired, resp.Status,
			"a processing PaymentIntent (since succeeded) was stored as a decline: %s", resp.Body)
	})
}

// rewritingProxy serves the emulator through a proxy that lets rewrite
// change the body of an answer to a PaymentIntent create: a way to have
// Stripe answer what Stripe documents but the emulator never says.
func rewritingProxy(t *testing.T, em *testutil.Emulator, rewrite func(body []byte) []byte) *testutil.Emulator {
	t.Helper()
	target, err := url.Parse(em.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodPost || resp.Request.URL.Path != "/v1/payment_intents" {
			return nil
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		body = rewrite(body)
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return &testutil.Emulator{Server: em.Server, URL: srv.URL}
}
