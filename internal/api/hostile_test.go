package api_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestHostileInput sends malformed keys, headers and bodies. Every one gets
// a clear 4xx problem, none is stored, and nothing is charged.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	auth := "Bearer " + apiKey
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)

	cases := []struct {
		name    string
		key     []string // each value sends the header once
		ctype   string
		body    string
		status  int
		problem string
	}{
		{"key with parameters", []string{`"k";a=1`}, "application/json", visa, 400, "idempotency-key-invalid"},
		{"key as an inner list", []string{`("a" "b")`}, "application/json", visa, 400, "idempotency-key-invalid"},
		{"key as an sf-integer-looking token list", []string{"a, b"}, "application/json", visa, 400, "idempotency-key-invalid"},
		{"key unterminated quote", []string{`"abc`}, "application/json", visa, 400, "idempotency-key-invalid"},
		{"empty quoted key", []string{`""`}, "application/json", visa, 400, "idempotency-key-invalid"},
		{"key sent twice", []string{"a", "b"}, "application/json", visa, 400, "idempotency-key-invalid"},
		{"key of non-ASCII bytes", []string{"clé"}, "application/json", visa, 400, "idempotency-key-invalid"},
		{"invalid UTF-8 body", []string{"k1"}, "application/json", "{\"amount\":2000,\"currency\":\"usd\",\"payment_method\":\"pm_card_visa\",\"description\":\"\xff\xfe\"}", 400, "invalid-request"},
		{"duplicate member", []string{"k2"}, "application/json", `{"amount":1,"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`, 400, "invalid-request"},
		{"huge number", []string{"k3"}, "application/json", `{"amount":1e400,"currency":"usd","payment_method":"pm_card_visa"}`, 400, "invalid-request"},
		{"huge integer", []string{"k4"}, "application/json", `{"amount":123456789012345678901234567890,"currency":"usd","payment_method":"pm_card_visa"}`, 400, "invalid-request"},
		{"deep nesting", []string{"k5"}, "application/json", `{"amount":` + deep + `,"currency":"usd","payment_method":"pm_card_visa"}`, 400, "invalid-request"},
		{"NUL in a string", []string{"k6"}, "application/json", `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","description":"a\u0000b"}`, 400, "invalid-request"},
		{"not an object", []string{"k7"}, "application/json", `[1,2,3]`, 400, "invalid-request"},
		{"empty body", []string{"k8"}, "application/json", ``, 400, "invalid-request"},
		{"trailing data", []string{"k9"}, "application/json", visa + `{}`, 400, "invalid-request"},
		{"wrong content type", []string{"k10"}, "application/x-www-form-urlencoded", "amount=2000", 415, "unsupported-media-type"},
		{"non-UTF-8 charset", []string{"k11"}, "application/json; charset=latin1", visa, 415, "unsupported-media-type"},
		{"no content type", []string{"k12"}, "", visa, 415, "unsupported-media-type"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			headers := []string{"Authorization", auth}
			for _, k := range tc.key {
				headers = append(headers, "Idempotency-Key", k)
			}
			if tc.ctype != "" {
				headers = append(headers, "Content-Type", tc.ctype)
			}
			requireProblem(t, svc.Do(t, http.MethodPost, "/payments", tc.body, headers...), tc.status, tc.problem)
		})
	}

	require.Empty(t, svc.Stripe.PaymentIntents())
	var keys int
	require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_keys").Scan(&keys))
	require.Zero(t, keys, "refused requests store nothing")

	// Odd paths and ids answer 4xx too.
	requireProblem(t, svc.Do(t, http.MethodGet, "/payments/abc", "", "Authorization", auth), 400, "invalid-request")
	requireProblem(t, svc.Do(t, http.MethodGet, "/payments/-1", "", "Authorization", auth), 400, "invalid-request")
	requireProblem(t, svc.Do(t, http.MethodGet, "/payments/99999999999999999999", "", "Authorization", auth), 400, "invalid-request")
	requireProblem(t, svc.Do(t, http.MethodGet, "/nope", ""), 404, "not-found")
	resp := svc.Do(t, http.MethodDelete, "/payments", "", "Authorization", auth)
	requireProblem(t, resp, 405, "method-not-allowed")
	require.Equal(t, "GET, POST", resp.Header.Get("Allow"))
	resp = svc.Do(t, http.MethodPut, "/payments/1", "", "Authorization", auth)
	requireProblem(t, resp, 405, "method-not-allowed")
	require.Equal(t, "GET", resp.Header.Get("Allow"))
	requireProblem(t, svc.Do(t, http.MethodPost, "/payments", visa, "Authorization", "Basic Zm9vOmJhcg==",
		"Idempotency-Key", "k", "Content-Type", "application/json"), 401, "unauthorized")
}

// TestControlCharactersInHeaders sends what Go's client refuses to send. Go's
// server refuses such a request before any handler runs, with a plain 400.
func TestControlCharactersInHeaders(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	for _, key := range []string{"abc\x01def", "abc\x00", "a\x7fb", "a\rb"} {
		status := rawPost(t, svc, apiKey, key, visa)
		require.Equal(t, http.StatusBadRequest, status, "key %q", key)
	}
	require.Empty(t, svc.Stripe.PaymentIntents())
}

// rawPost writes a POST /payments byte by byte and returns the status.
func rawPost(t *testing.T, svc *testutil.Service, apiKey, key, body string) int {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(svc.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", apiKey, key, len(body), body)
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode
}

func TestOversizedHeadersAreRefused(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	resp := svc.Do(t, http.MethodPost, "/payments", visa, "Authorization", "Bearer "+apiKey,
		"Idempotency-Key", "k", "Content-Type", "application/json", "X-Padding", strings.Repeat("a", 64<<10))
	require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.Status)
	require.Empty(t, svc.Stripe.PaymentIntents())
}

func TestRateLimitOnNewKeys(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{RateLimit: 1})
	_, apiKey := svc.NewUser(t)
	_, other := svc.NewUser(t)

	require.Equal(t, http.StatusCreated, svc.PostPayment(t, apiKey, "r1", visa).Status)
	limited := svc.PostPayment(t, apiKey, "r3", visa)
	requireProblem(t, limited, http.StatusTooManyRequests, "rate-limited")
	require.NotEmpty(t, limited.Header.Get("Retry-After"))

	// Replays are not new keys, and other users have their own budget.
	require.Equal(t, "true", svc.PostPayment(t, apiKey, "r1", visa).Header.Get("Idempotent-Replayed"))
	require.Equal(t, http.StatusCreated, svc.PostPayment(t, other, "r3", visa).Status)

	// The refusal stored nothing: after a pause the same key proceeds.
	time.Sleep(time.Second)
	resp := svc.PostPayment(t, apiKey, "r3", visa)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
}

func TestCapOnUnfinishedKeys(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{MaxUnfinished: 2})
	_, apiKey := svc.NewUser(t)
	_, other := svc.NewUser(t)
	for _, k := range []string{"u1", "u2"} {
		svc.Stripe.Inject(stripefakeFault500())
		requireProblem(t, svc.PostPayment(t, apiKey, k, visa), http.StatusServiceUnavailable, "processor-unavailable")
	}
	capped := svc.PostPayment(t, apiKey, "u3", visa)
	requireProblem(t, capped, http.StatusTooManyRequests, "too-many-unfinished-keys")
	require.Contains(t, string(svc.Do(t, http.MethodGet, "/metrics", "").Body),
		`paymentsd_idempotency_outcomes_total{flow="payment",outcome="too_many_unfinished"} 1`)
	require.Equal(t, http.StatusCreated, svc.PostPayment(t, other, "u3", visa).Status)

	// Finishing one of the unfinished keys makes room.
	require.Equal(t, http.StatusCreated, svc.PostPayment(t, apiKey, "u1", visa).Status)
	require.Equal(t, http.StatusCreated, svc.PostPayment(t, apiKey, "u3", visa).Status)
}

// TestSQLMetacharactersAreData sends keys and text made of SQL syntax. Every
// query is a bound sqlc statement, so they are stored and replayed as the
// bytes they are, and nothing else happens to the database.
func TestSQLMetacharactersAreData(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	key := `"x'); DROP TABLE payments; --"`
	description := `Robert'); DROP TABLE idempotency_keys; -- \\ $1 %s`
	body := `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "description": "` +
		strings.ReplaceAll(description, `\`, `\\`) + `"}`

	first := svc.PostPayment(t, apiKey, key, body)
	require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
	require.Equal(t, description, *decode[payment](t, first).Description)
	again := svc.PostPayment(t, apiKey, key, body)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))

	var storedKey string
	var tables int
	require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT idempotency_key FROM idempotency_keys").Scan(&storedKey))
	require.Equal(t, `x'); DROP TABLE payments; --`, storedKey)
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_tables WHERE tablename IN ('payments', 'idempotency_keys')").Scan(&tables))
	require.Equal(t, 2, tables)
}

// TestStripeCallTimesOut bounds a Stripe call that never answers: the
// request gives up at the Stripe timeout with a retryable 503, frees the key,
// and the retry resumes with the same Stripe key, charging once.
func TestStripeCallTimesOut(t *testing.T) {
	t.Parallel()
	const stripeTimeout = 300 * time.Millisecond
	svc := testutil.StartService(t, testutil.ServiceOptions{StripeTimeout: stripeTimeout})
	_, apiKey := svc.NewUser(t)
	svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultHang})

	start := time.Now()
	resp := svc.PostPayment(t, apiKey, "slow", visa)
	requireProblem(t, resp, http.StatusServiceUnavailable, "processor-unavailable")
	require.Less(t, time.Since(start), 5*stripeTimeout, "the call is bounded by the Stripe timeout")

	// The hung call never reached Stripe's bookkeeping; the retry charges once.
	retry := svc.PostPayment(t, apiKey, "slow", visa)
	require.Equal(t, http.StatusCreated, retry.Status, "body: %s", retry.Body)
	require.Len(t, svc.Stripe.PaymentIntents(), 1)
}
