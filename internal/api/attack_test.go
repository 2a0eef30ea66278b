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
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
	"github.com/paymentsd/paymentsd/internal/workers"
)

// Attacks on the charge path from a payments engineer's review. Each test
// reproduced a defect; each defect is fixed, and the test stays so it cannot
// come back.

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

// Was: the lookup that settled an indeterminate 500 matched PaymentIntents
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
func TestAKeyReusedAfterItsTombstoneExpiredNeverAdoptsTheOldCharge(t *testing.T) {
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
			svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em.Emulator, Workers: quietCompleter})
			_, apiKey := svc.NewUser(t)

			// 91 days ago (Stripe's clock): the key's first use.
			em.setOffset(-91 * 24 * time.Hour)
			first := svc.PostPayment(t, apiKey, "monthly", visa)
			require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
			oldPI := *decode[payment](t, first).StripePaymentIntentID
			expireKey(t, svc, "monthly")
			em.setOffset(0)

			// Today: the key is used again. Its first create meets a plain 500
			// (nothing created); the retry finds the key spent and looks up.
			em.Inject(stripefake.Fault{Kind: stripefake.Fault500})
			requireProblem(t, svc.PostPayment(t, apiKey, "monthly", tc.body), http.StatusServiceUnavailable, "processor-unavailable")
			retry := svc.PostPayment(t, apiKey, "monthly", tc.body)

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
}

// Was: a parked key on a busy account could never be resolved as not
// charged: the resolver's check listed the account through the lookup's
// capped listing and failed, and a key that charged nothing stayed parked
// for ever. Then (70e3608) it stood on search alone, which lags writes. Now
// it lists only the stretch search may not cover yet, up to the key's last
// possible send, and goes through once search covers the rest. Search lags
// a few seconds here, and the service assumes as much.
func TestOperatorResolvesNotChargedOnABusyAccount(t *testing.T) {
	t.Parallel()
	const lag = 3 * time.Second
	em := testutil.StartEmulator(t, stripefake.Options{SearchLag: lag})
	// A hundred pages are listed: generous bounds, for a loaded machine.
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, StripeTimeout: 40 * time.Second,
		RequestTimeout: 60 * time.Second, Workers: quietCompleter,
		Stripe: payments.StripeConfig{SearchLag: lag, LookupLookback: time.Second}})
	_, apiKey := svc.NewUser(t)
	em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
	requireProblem(t, svc.PostPayment(t, apiKey, "parked", visa), http.StatusServiceUnavailable, "needs-attention")
	parkedAt := time.Now()
	require.Empty(t, em.PaymentIntents(), "nothing was charged")
	plantMany(t, em, 10_050)

	time.Sleep(time.Until(parkedAt.Add(lag + 2*time.Second)))
	_, err := svc.App.Resolver.NotCharged(context.Background(), keyID(t, svc, "parked"))
	require.NoError(t, err, "nothing of this intent exists at Stripe; the operator must be able to say so")
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

// Was: a create answered with a PaymentIntent in status "processing"
// (Stripe documents it for every payment method: quick for cards, days for
// others; the final status comes later, by webhook or retrieve) is recorded
// as a decline: the payment is stored "failed", the client gets a stored 402
// card-declined, replayed for ever, and is invited to pay again with a new
// key, while the PaymentIntent goes on to succeed. The lookup path treats
// the very same status as "not final yet"; the create path must too.
func TestAProcessingPaymentIntentIsNeverRecordedAsDeclined(t *testing.T) {
	t.Parallel()
	em := testutil.StartEmulator(t, stripefake.Options{})
	var once atomic.Bool
	front := rewritingProxy(t, em, func(body []byte) []byte {
		if once.CompareAndSwap(false, true) {
			return bytes.Replace(body, []byte(`"status":"succeeded"`), []byte(`"status":"processing"`), 1)
		}
		return body
	})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: front, Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)

	resp := svc.PostPayment(t, apiKey, "processing", visa)
	pis := em.PaymentIntents()
	require.Len(t, pis, 1)
	require.Equal(t, "succeeded", pis[0].Status, "the money moved")
	require.NotEqual(t, http.StatusPaymentRequired, resp.Status,
		"a processing PaymentIntent (since succeeded) was stored as a decline: %s", resp.Body)
}
