package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// Fixtures every test file of the package shares: the answers' shapes, the
// requests and assertions a test of the running service makes, and the
// Stripe side a test arranges. A fixture of one file's behaviour lives in
// that file.

const visa = `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "description": "order 1"}`

type payment struct {
	ID                    string  `json:"id"`
	Amount                int64   `json:"amount"`
	Currency              string  `json:"currency"`
	Status                string  `json:"status"`
	StripePaymentIntentID *string `json:"stripe_payment_intent_id"`
	Description           *string `json:"description"`
	CaptureMethod         string  `json:"capture_method"`
	AmountCaptured        int64   `json:"amount_captured"`
	AmountRefunded        int64   `json:"amount_refunded"`
	CreatedAt             string  `json:"created_at"`
}

type refund struct {
	ID             string  `json:"id"`
	PaymentID      string  `json:"payment_id"`
	Amount         int64   `json:"amount"`
	Currency       string  `json:"currency"`
	Status         string  `json:"status"`
	Reason         *string `json:"reason"`
	StripeRefundID *string `json:"stripe_refund_id"`
}

type problemBody struct {
	Type        string `json:"type"`
	Status      int    `json:"status"`
	Detail      string `json:"detail"`
	PaymentID   string `json:"payment_id"`
	DeclineCode string `json:"decline_code"`
	Errors      []struct {
		Pointer string `json:"pointer"`
	} `json:"errors"`
}

func decode[T any](t *testing.T, resp *testutil.Response) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(resp.Body, &v), "body: %s", resp.Body)
	return v
}

func requireProblem(t *testing.T, resp *testutil.Response, status int, slug string) problemBody {
	t.Helper()
	require.Equal(t, status, resp.Status, "body: %s", resp.Body)
	require.Equal(t, "application/problem+json", resp.Header.Get("Content-Type"))
	p := decode[problemBody](t, resp)
	require.Equal(t, "https://paymentsd.dev/problems/"+slug, p.Type)
	require.Equal(t, status, p.Status)
	return p
}

// requireMetric asserts that /metrics carries the line want.
func requireMetric(t *testing.T, svc *testutil.Service, want string) {
	t.Helper()
	resp := svc.Do(t, http.MethodGet, "/metrics", "")
	require.Equal(t, http.StatusOK, resp.Status)
	require.Contains(t, string(resp.Body), want+"\n")
}

// paid makes a succeeded payment of 2000 and returns it.
func paid(t *testing.T, svc *testutil.Service, apiKey, key string) payment {
	t.Helper()
	resp := svc.PostPayment(t, apiKey, key, visa)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	return decode[payment](t, resp)
}

// postRefund sends POST /payments/{id}/refunds.
func postRefund(t testing.TB, svc *testutil.Service, apiKey, idemKey, paymentID, body string) *testutil.Response {
	t.Helper()
	return svc.Do(t, http.MethodPost, "/payments/"+paymentID+"/refunds", body,
		"Authorization", "Bearer "+apiKey, "Idempotency-Key", idemKey, "Content-Type", "application/json")
}

func getPaymentOf(t *testing.T, svc *testutil.Service, apiKey, id string) map[string]any {
	t.Helper()
	resp := svc.Do(t, http.MethodGet, "/payments/"+id, "", "Authorization", "Bearer "+apiKey)
	require.Equal(t, http.StatusOK, resp.Status)
	return decode[map[string]any](t, resp)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// rowID is the database's own id of the payment whose public id is id, for
// tests that read the rows that refer to it.
func rowID(t *testing.T, svc *testutil.Service, id string) int64 {
	t.Helper()
	public, err := ids.Parse(ids.Payment, id)
	require.NoError(t, err)
	var n int64
	require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT id FROM payments WHERE public_id = $1", public).Scan(&n))
	return n
}

// keyID is the id of the user's key.
func keyID(t *testing.T, svc *testutil.Service, key string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT id FROM idempotency_keys WHERE idempotency_key = $1", key).Scan(&id))
	return id
}

// receipts counts the receipts recorded or waiting in the outbox.
func receipts(t *testing.T, svc *testutil.Service) int {
	t.Helper()
	var n int
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT (SELECT count(*) FROM receipts) + (SELECT count(*) FROM receipt_outbox)").Scan(&n))
	return n
}

// namespaceOf is the service's deployment namespace.
func namespaceOf(t *testing.T, svc *testutil.Service) uuid.UUID {
	t.Helper()
	var ns uuid.UUID
	require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT namespace FROM deployment").Scan(&ns))
	return ns
}

// intentOf is the intent of the user's key in the service's deployment.
func intentOf(t *testing.T, svc *testutil.Service, userID int64, key string) intent.Intent {
	t.Helper()
	return intent.Intent{Namespace: namespaceOf(t, svc), UserID: userID, Key: key}
}

// forgetEverything deletes every row a request committed, as a failover to
// an asynchronous standby or a restore loses them, in one transaction
// (retried if the receipt dispatcher's own deadlocks with it).
func forgetEverything(t *testing.T, svc *testutil.Service) {
	t.Helper()
	require.NoError(t, db.WithTx(context.Background(), svc.Pool, func(ctx context.Context, tx db.Tx) error {
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

// quietCompleter keeps the background completer off the test's keys, so
// only the test's own requests drive them.
var quietCompleter = workers.Config{Completer: workers.CompleterConfig{MinIdle: time.Hour}}

// completer is a completer over the service that takes any idle key at once.
func completer(svc *testutil.Service) *workers.CompleterWorker {
	return &workers.CompleterWorker{
		Pool: svc.Pool, Engine: svc.App.Engine,
		Config: workers.CompleterConfig{MinIdle: time.Millisecond, Backoff: time.Millisecond},
	}
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stripeClient talks to the emulator as another Stripe client would: to
// plant PaymentIntents that paymentsd did not create.
func stripeClient(em *testutil.Emulator) *client.API {
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL: stripe.String(em.URL), MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return client.New("sk_test_planter", &stripe.Backends{API: backend, Connect: backend, Uploads: backend})
}

// plant creates a succeeded PaymentIntent carrying metadata.
func plant(t *testing.T, em *testutil.Emulator, amount int64, metadata map[string]string) *stripe.PaymentIntent {
	t.Helper()
	params := &stripe.PaymentIntentParams{
		Amount: stripe.Int64(amount), Currency: stripe.String("usd"),
		PaymentMethod: stripe.String("pm_card_visa"), Confirm: stripe.Bool(true),
	}
	for k, v := range metadata {
		params.AddMetadata(k, v)
	}
	pi, err := stripeClient(em).PaymentIntents.New(params)
	require.NoError(t, err)
	return pi
}

// plantMany creates n succeeded PaymentIntents with no paymentsd metadata.
func plantMany(t *testing.T, em *testutil.Emulator, n int) {
	t.Helper()
	sc := stripeClient(em)
	var (
		wg   sync.WaitGroup
		next atomic.Int64
		errs atomic.Int64
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				_, err := sc.PaymentIntents.New(&stripe.PaymentIntentParams{
					Amount: stripe.Int64(1000), Currency: stripe.String("usd"),
					PaymentMethod: stripe.String("pm_card_visa"), Confirm: stripe.Bool(true),
				})
				if err != nil {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, errs.Load())
}

// skewedEmulator is an emulator whose clock (Stripe's) is time.Now() plus an
// offset the test moves: a way to let Stripe's 24 hours pass, or to have
// made a request "long ago".
type skewedEmulator struct {
	*testutil.Emulator
	offset atomic.Int64
}

func startSkewedEmulator(t *testing.T, opts stripefake.Options) *skewedEmulator {
	t.Helper()
	em := &skewedEmulator{}
	opts.Now = func() time.Time { return time.Now().Add(time.Duration(em.offset.Load())) }
	em.Emulator = testutil.StartEmulator(t, opts)
	return em
}

func (em *skewedEmulator) setOffset(d time.Duration) { em.offset.Store(int64(d)) }

// switchableFront serves the emulator through a reverse proxy that, while
// down for a request (fail returns true), drops the connection without an
// answer: Stripe unreachable for that request.
func switchableFront(t *testing.T, em *testutil.Emulator, fail func(r *http.Request) bool) *testutil.Emulator {
	t.Helper()
	target, err := url.Parse(em.URL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail(r) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.(*net.TCPConn).SetLinger(0)
				_ = conn.Close()
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &testutil.Emulator{Server: em.Server, URL: srv.URL}
}

// resolveBehindAWebhook plays a webhook's transaction against keys resolve
// of key id, in the webhook's lock order: it locks the key's resource row
// (lockRow, a SELECT … FOR UPDATE of the row of key $1), waits until
// resolve, resolving the key as nothing done at Stripe, queues for a lock
// in a query like waitingQuery, then locks the key (as ClaimForEvent does)
// and commits. A resolve that locked the key before the row deadlocks with
// it, and Postgres aborts the webhook's transaction. It returns resolve's
// error.
func resolveBehindAWebhook(t *testing.T, svc *testutil.Service, id int64, lockRow, waitingQuery string) error {
	t.Helper()
	ctx := context.Background()
	webhook, err := svc.Pool.Driver().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = webhook.Rollback(ctx) }()
	// This transaction looks for a deadlock first, so that Postgres
	// aborts it (the resolve would retry, and hide the cycle).
	_, err = webhook.Exec(ctx, `SET LOCAL deadlock_timeout = '20ms'`)
	require.NoError(t, err)
	_, err = webhook.Exec(ctx, lockRow, id)
	require.NoError(t, err)

	resolved := make(chan error, 1)
	go func() {
		_, err := svc.App.Resolve(ctx, id, "")
		resolved <- err
	}()
	testutil.WaitForf(t, 10*time.Second, 5*time.Millisecond, func() bool {
		var waiting int
		require.NoError(t, svc.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, waitingQuery).Scan(&waiting))
		return waiting == 1
	}, "keys resolve never waited for the lock of %s", lockRow)
	_, err = webhook.Exec(ctx, `SELECT 1 FROM idempotency_keys WHERE id = $1 FOR UPDATE`, id)
	require.NoError(t, err, "the webhook's transaction deadlocked with keys resolve")
	require.NoError(t, webhook.Commit(ctx))
	return <-resolved
}
