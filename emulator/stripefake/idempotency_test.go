package stripefake_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	first, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "replay-key"))
	require.NoError(t, err)
	require.Empty(t, first.LastResponse.Header.Get("Idempotent-Replayed"))

	second, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "replay-key"))
	require.NoError(t, err)
	require.Equal(t, first.ID, second.ID)
	require.Equal(t, "true", second.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.LastResponse.RawJSON), string(second.LastResponse.RawJSON))
	require.NotEqual(t, first.LastResponse.RequestID, second.LastResponse.RequestID)

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.PaymentIntentsCreated)
	require.EqualValues(t, 1, st.Replays)
	require.EqualValues(t, 2, st.CreateRequests)
	require.Len(t, e.fake.PaymentIntents(), 1)
	require.Equal(t, "replay-key", e.fake.PaymentIntents()[0].IdempotencyKey)

	// Keys are scoped per API key.
	other, err := newClient(e.srv, "sk_test_other").PaymentIntents.New(piParams("pm_card_visa", "1", "replay-key"))
	require.NoError(t, err)
	require.NotEqual(t, first.ID, other.ID)
	require.Empty(t, other.LastResponse.Header.Get("Idempotent-Replayed"))
}

func TestIdempotencyParamsCompareOrderIndependent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	auth := "Bearer sk_test_123"
	hdr := http.Header{"Idempotency-Key": {"order"}}
	body1 := "amount=500&currency=usd&metadata[a]=1&metadata[b]=2&payment_method=pm_card_visa&confirm=true"
	body2 := "confirm=true&metadata[b]=2&payment_method=pm_card_visa&metadata[a]=1&currency=usd&amount=500"

	for i, body := range []string{body1, body2} {
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/payment_intents", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", auth)
		req.Header["Idempotency-Key"] = hdr["Idempotency-Key"]
		resp, err := e.srv.Client().Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, i == 1, resp.Header.Get("Idempotent-Replayed") == "true")
	}
	require.Len(t, e.fake.PaymentIntents(), 1)
}

func TestIdempotencyKeyWithDifferentParams(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "mismatch"))
	require.NoError(t, err)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "2", "mismatch"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
	require.Contains(t, se.Msg, "same parameters")
	var ie *stripe.IdempotencyError
	require.ErrorAs(t, err, &ie)

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.IdempotencyErrors)
	require.EqualValues(t, 1, st.PaymentIntentsCreated)
}

func TestConcurrentSameKeyWhileHung(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultHang})

	type result struct {
		pi  *stripe.PaymentIntent
		err error
	}
	done := make(chan result, 1)
	go func() {
		pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "hung-key"))
		done <- result{pi, err}
	}()
	require.Eventually(t, func() bool { return e.fake.Stats().HungNow == 1 }, 5*time.Second, time.Millisecond)

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "hung-key"))
	se := stripeErr(t, err)
	require.Equal(t, http.StatusConflict, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
	require.Equal(t, stripe.ErrorCodeIdempotencyKeyInUse, se.Code)

	// A different key is not blocked by the hang.
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "2", "other-key"))
	require.NoError(t, err)

	e.fake.ReleaseHangs()
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, r.pi.Status)

	// Nothing was saved for the 409; the key now replays the hung request's answer.
	again, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "hung-key"))
	require.NoError(t, err)
	require.Equal(t, r.pi.ID, again.ID)
	require.Equal(t, "true", again.LastResponse.Header.Get("Idempotent-Replayed"))

	st := e.fake.Stats()
	require.EqualValues(t, 1, st.KeyInUse)
	require.EqualValues(t, 1, st.Hangs)
	require.EqualValues(t, 0, st.HungNow)
	require.EqualValues(t, 2, st.PaymentIntentsCreated)
}

func TestIdempotencyTTL(t *testing.T) {
	t.Parallel()
	now := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	e := newEnv(t, stripefake.Options{
		Now:            func() time.Time { return time.Unix(0, clock.Load()) },
		IdempotencyTTL: time.Hour,
	})

	first, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "ttl"))
	require.NoError(t, err)
	require.Equal(t, now.Unix(), first.Created)

	clock.Store(now.Add(2 * time.Hour).UnixNano())
	second, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "ttl"))
	require.NoError(t, err)
	require.NotEqual(t, first.ID, second.ID)
	require.Empty(t, second.LastResponse.Header.Get("Idempotent-Replayed"))
}

// Stripe's answer to a key reused with other parameters, and the injected
// idempotency_error, are the same 400: {"error":{"type":"idempotency_error",
// "message":...}} with no code.
func TestIdempotencyErrorShape(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	auth := "Bearer sk_test_123"
	form := func(amount string) url.Values {
		return url.Values{"amount": {amount}, "currency": {"usd"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"}}
	}
	errorOf := func(body string) map[string]any {
		var env map[string]map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &env), body)
		require.Len(t, env, 1, body)
		return env["error"]
	}

	code, _, _ := rawDo(t, e, http.MethodPost, "/v1/payment_intents", auth, http.Header{"Idempotency-Key": {"shape"}}, form("100"))
	require.Equal(t, http.StatusOK, code)
	code, h, body := rawDo(t, e, http.MethodPost, "/v1/payment_intents", auth, http.Header{"Idempotency-Key": {"shape"}}, form("200"))
	require.Equal(t, http.StatusBadRequest, code)
	require.Empty(t, h.Get("Idempotent-Replayed"))
	mismatch := errorOf(body)
	require.Equal(t, "idempotency_error", mismatch["type"])
	require.Equal(t, "Keys for idempotent requests can only be used with the same parameters they were first used with. "+
		"Try using a key other than 'shape' if you meant to execute a different request.", mismatch["message"])
	require.NotContains(t, mismatch, "code")
	require.Regexp(t, `^https://dashboard.stripe.com/test/logs/req_`, mismatch["request_log_url"])

	e.fake.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
	code, _, body = rawDo(t, e, http.MethodPost, "/v1/payment_intents", auth, http.Header{"Idempotency-Key": {"shape-2"}}, form("100"))
	require.Equal(t, http.StatusBadRequest, code)
	injected := errorOf(body)
	require.Equal(t, "idempotency_error", injected["type"])
	require.Contains(t, injected["message"], "'shape-2'")
	require.ElementsMatch(t, slices.Collect(maps.Keys(mismatch)), slices.Collect(maps.Keys(injected)))
	require.Len(t, e.fake.PaymentIntents(), 1)
}
