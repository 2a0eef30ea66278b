package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestEndpoint covers what every idempotent endpoint does before and around
// its flow (serveIdempotent): the key, the body, the replay, and the
// requests it refuses, storing nothing.
func TestEndpoint(t *testing.T) {
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

	t.Run("ReplayIsByteForByte", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		first := svc.PostPayment(t, bundle.apiKey, "k1", visa)
		require.Equal(t, http.StatusCreated, first.Status)
		second := svc.PostPayment(t, bundle.apiKey, "k1", visa)

		require.Equal(t, first.Status, second.Status)
		require.Equal(t, string(first.Body), string(second.Body))
		require.Equal(t, first.Header.Get("Location"), second.Header.Get("Location"))
		require.Equal(t, first.Header.Get("Content-Type"), second.Header.Get("Content-Type"))
		require.Equal(t, "true", second.Header.Get("Idempotent-Replayed"))
		require.Len(t, svc.Stripe.PaymentIntents(), 1)
		require.EqualValues(t, 1, svc.Stripe.Stats().CreateRequests)

		// The key holds the digest of the bytes sent, by which the retry was
		// known without its body being decoded.
		var digest []byte
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			`SELECT request_digest FROM idempotency_keys WHERE idempotency_key = 'k1'`).Scan(&digest))
		require.Equal(t, idempotency.Digest(http.MethodPost, "/payments", []byte(visa)), digest)
	})

	// A body that does not decode is refused under a finished key too, even
	// though the key's answer is stored: only the bytes of the request that
	// made the key are answered without being decoded.
	t.Run("AnInvalidBodyUnderAFinishedKeyIsRefused", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "k", visa).Status)
		resp := svc.PostPayment(t, bundle.apiKey, "k", strings.Replace(visa, `"usd"`, `"USD"`, 1))
		requireProblem(t, resp, http.StatusBadRequest, "invalid-request")
		resp = svc.PostPayment(t, bundle.apiKey, "k", visa[:len(visa)-1])
		requireProblem(t, resp, http.StatusBadRequest, "invalid-request")
		require.Len(t, svc.Stripe.PaymentIntents(), 1)
	})

	t.Run("ReorderedJSONIsTheSameRequest", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		first := svc.PostPayment(t, bundle.apiKey, "k", `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`)
		require.Equal(t, http.StatusCreated, first.Status)
		second := svc.PostPayment(t, bundle.apiKey, "k", "{ \"payment_method\" : \"pm_card_visa\",\n \"currency\":\"usd\", \"amount\": 2000 }")
		require.Equal(t, http.StatusCreated, second.Status, "body: %s", second.Body)
		require.Equal(t, "true", second.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(first.Body), string(second.Body))
		require.Len(t, svc.Stripe.PaymentIntents(), 1)
	})

	t.Run("KeyReusedWithDifferentRequest", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "k", visa).Status)
		resp := svc.PostPayment(t, bundle.apiKey, "k", strings.Replace(visa, "2000", "2001", 1))
		requireProblem(t, resp, http.StatusUnprocessableEntity, "idempotency-key-reused")
		require.Len(t, svc.Stripe.PaymentIntents(), 1)
		require.EqualValues(t, 1, svc.Stripe.Stats().CreateRequests)
	})

	t.Run("QuotedAndBareKeyAreTheSameKey", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		first := svc.PostPayment(t, bundle.apiKey, `"order-7"`, visa)
		require.Equal(t, http.StatusCreated, first.Status)
		second := svc.PostPayment(t, bundle.apiKey, `order-7`, visa)
		require.Equal(t, "true", second.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(first.Body), string(second.Body))
		require.Len(t, svc.Stripe.PaymentIntents(), 1)
	})

	t.Run("KeyLength", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		requireProblem(t, svc.Do(t, http.MethodPost, "/payments", visa,
			"Authorization", "Bearer "+bundle.apiKey, "Content-Type", "application/json"), http.StatusBadRequest, "idempotency-key-missing")

		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, strings.Repeat("a", 255), visa).Status)
		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, `"`+strings.Repeat("b", 255)+`"`, visa).Status)
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, strings.Repeat("c", 256), visa), http.StatusBadRequest, "idempotency-key-invalid")
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, `"`+strings.Repeat("d", 256)+`"`, visa), http.StatusBadRequest, "idempotency-key-invalid")
		require.Len(t, svc.Stripe.PaymentIntents(), 2)
	})

	// Keys and text made of SQL syntax: every query is a bound sqlc
	// statement, so they are stored and replayed as the bytes they are, and
	// nothing else happens to the database.
	t.Run("SQLMetacharactersAreData", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		key := `"x'); DROP TABLE payments; --"`
		description := `Robert'); DROP TABLE idempotency_keys; -- \\ $1 %s`
		body := `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "description": "` +
			strings.ReplaceAll(description, `\`, `\\`) + `"}`

		first := svc.PostPayment(t, bundle.apiKey, key, body)
		require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
		require.Equal(t, description, *decode[payment](t, first).Description)
		again := svc.PostPayment(t, bundle.apiKey, key, body)
		require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))

		var storedKey string
		var tables int
		require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT idempotency_key FROM idempotency_keys").Scan(&storedKey))
		require.Equal(t, `x'); DROP TABLE payments; --`, storedKey)
		require.NoError(t, svc.Pool.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_tables WHERE tablename IN ('payments', 'idempotency_keys')").Scan(&tables))
		require.Equal(t, 2, tables)
	})

	t.Run("ValidationErrorsAreNotStored", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		bad := svc.PostPayment(t, bundle.apiKey, "fix-me", `{"amount": 0, "currency": "USD", "payment_method": "pm_card_visa", "tip": 1}`)
		p := requireProblem(t, bad, http.StatusBadRequest, "invalid-request")
		var pointers []string
		for _, e := range p.Errors {
			pointers = append(pointers, e.Pointer)
		}
		require.Equal(t, []string{"/amount", "/currency", "/tip"}, pointers)

		good := svc.PostPayment(t, bundle.apiKey, "fix-me", visa)
		require.Equal(t, http.StatusCreated, good.Status, "body: %s", good.Body)
		require.Empty(t, good.Header.Get("Idempotent-Replayed"))
		require.Len(t, svc.Stripe.PaymentIntents(), 1)
	})

	t.Run("AuthAndMediaType", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		requireProblem(t, svc.Do(t, http.MethodPost, "/payments", visa, "Idempotency-Key", "k", "Content-Type", "application/json"),
			http.StatusUnauthorized, "unauthorized")
		requireProblem(t, svc.PostPayment(t, "pd_not_a_key", "k", visa), http.StatusUnauthorized, "unauthorized")
		requireProblem(t, svc.Do(t, http.MethodPost, "/payments", visa,
			"Authorization", "Bearer "+bundle.apiKey, "Idempotency-Key", "k", "Content-Type", "text/plain"),
			http.StatusUnsupportedMediaType, "unsupported-media-type")
		requireProblem(t, svc.PostPayment(t, bundle.apiKey, "k", `{"amount":1,"currency":"usd","payment_method":"pm_card_visa","description":"`+
			strings.Repeat("x", 1<<20)+`"}`), http.StatusRequestEntityTooLarge, "request-too-large")
		tooLarge, closed := postChunked(t, svc, bundle.apiKey, "k", `{"amount":1,"currency":"usd","payment_method":"pm_card_visa","description":"`+
			strings.Repeat("x", 1<<20)+`"}`)
		requireProblem(t, tooLarge, http.StatusRequestEntityTooLarge, "request-too-large")
		require.True(t, closed, "the rest of the body is not read: the connection closes")
		requireProblem(t, postTruncated(t, svc, bundle.apiKey, "k", visa), http.StatusBadRequest, "invalid-request")
		requireProblem(t, svc.Do(t, http.MethodDelete, "/payments", "", "Authorization", "Bearer "+bundle.apiKey),
			http.StatusMethodNotAllowed, "method-not-allowed")
		require.Empty(t, svc.Stripe.PaymentIntents())

		// The refused requests reserved nothing: the key is still fresh.
		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "k", visa).Status)
	})

	// Malformed keys, headers and bodies: every one gets a clear 4xx problem,
	// none is stored, and nothing is charged.
	t.Run("MalformedRequestsAreRefusedAndStoreNothing", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		auth := "Bearer " + bundle.apiKey
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
	})

	// What Go's client refuses to send: Go's server refuses such a request
	// before any handler runs, with a plain 400.
	t.Run("ControlCharactersInHeaders", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		for _, key := range []string{"abc\x01def", "abc\x00", "a\x7fb", "a\rb"} {
			status := rawPost(t, svc, bundle.apiKey, key, visa)
			require.Equal(t, http.StatusBadRequest, status, "key %q", key)
		}
		require.Empty(t, svc.Stripe.PaymentIntents())
	})

	t.Run("OversizedHeadersAreRefused", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		resp := svc.Do(t, http.MethodPost, "/payments", visa, "Authorization", "Bearer "+bundle.apiKey,
			"Idempotency-Key", "k", "Content-Type", "application/json", "X-Padding", strings.Repeat("a", 64<<10))
		require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.Status)
		require.Empty(t, svc.Stripe.PaymentIntents())
	})

	t.Run("RateLimitOnNewKeys", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setupWith(t, testutil.ServiceOptions{RateLimit: 1})
		_, other := svc.NewUser(t)

		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "r1", visa).Status)
		limited := svc.PostPayment(t, bundle.apiKey, "r3", visa)
		requireProblem(t, limited, http.StatusTooManyRequests, "rate-limited")
		require.NotEmpty(t, limited.Header.Get("Retry-After"))

		// Replays are not new keys, and other users have their own budget.
		require.Equal(t, "true", svc.PostPayment(t, bundle.apiKey, "r1", visa).Header.Get("Idempotent-Replayed"))
		require.Equal(t, http.StatusCreated, svc.PostPayment(t, other, "r3", visa).Status)

		// The refusal stored nothing: after a pause the same key proceeds.
		time.Sleep(time.Second)
		resp := svc.PostPayment(t, bundle.apiKey, "r3", visa)
		require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
		require.Empty(t, resp.Header.Get("Idempotent-Replayed"))
	})

	t.Run("CapOnUnfinishedKeys", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setupWith(t, testutil.ServiceOptions{MaxUnfinished: 2})
		_, other := svc.NewUser(t)
		for _, k := range []string{"u1", "u2"} {
			svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500})
			requireProblem(t, svc.PostPayment(t, bundle.apiKey, k, visa), http.StatusServiceUnavailable, "processor-unavailable")
		}
		capped := svc.PostPayment(t, bundle.apiKey, "u3", visa)
		requireProblem(t, capped, http.StatusTooManyRequests, "too-many-unfinished-keys")
		require.Contains(t, string(svc.Do(t, http.MethodGet, "/metrics", "").Body),
			`paymentsd_idempotency_outcomes_total{flow="payment",outcome="too_many_unfinished"} 1`)
		require.Equal(t, http.StatusCreated, svc.PostPayment(t, other, "u3", visa).Status)

		// Finishing one of the unfinished keys makes room.
		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "u1", visa).Status)
		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "u3", visa).Status)
	})
}

// postChunked posts a payment whose body is sent in chunks, without a
// Content-Length: the server learns its size only by reading it. closed
// says whether the server closes the connection after answering.
func postChunked(t *testing.T, svc *testutil.Service, apiKey, idemKey, body string) (resp *testutil.Response, closed bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, svc.URL+"/payments", io.MultiReader(strings.NewReader(body)))
	require.NoError(t, err)
	req.ContentLength = -1 // unknown: sent chunked
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Idempotency-Key", idemKey)
	req.Header.Set("Content-Type", "application/json")
	r, err := svc.Client.Do(req)
	require.NoError(t, err)
	return testutil.ReadResponse(t, r), r.Close
}

// postTruncated posts a payment whose body ends before the length it
// announces: the client sends it, then stops sending, and reads the answer.
func postTruncated(t *testing.T, svc *testutil.Service, apiKey, idemKey, body string) *testutil.Response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(svc.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", apiKey, idemKey, len(body)+10, body)
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	return testutil.ReadResponse(t, resp)
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
