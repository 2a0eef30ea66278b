package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/idempotency"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

func TestCreatePayment(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	userID, apiKey := svc.NewUser(t)

	resp := svc.PostPayment(t, apiKey, "order-1", visa)
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

	got := svc.Do(t, http.MethodGet, resp.Header.Get("Location"), "", "Authorization", "Bearer "+apiKey)
	require.Equal(t, http.StatusOK, got.Status)
	require.JSONEq(t, string(resp.Body), string(got.Body))

	pis := svc.Stripe.PaymentIntents()
	require.Len(t, pis, 1)
	require.Equal(t, *p.StripePaymentIntentID, pis[0].ID)
	// The PaymentIntent names the client's intent, not a database sequence.
	var namespace string
	require.NoError(t, svc.Pool.QueryRow(context.Background(), "SELECT namespace::text FROM deployment").Scan(&namespace))
	require.Equal(t, namespace, pis[0].Metadata[intent.MetadataNamespace])
	require.Equal(t, itoa(userID), pis[0].Metadata[intent.MetadataUserID])
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
}

func TestReplayIsByteForByte(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)

	first := svc.PostPayment(t, apiKey, "k1", visa)
	require.Equal(t, http.StatusCreated, first.Status)
	second := svc.PostPayment(t, apiKey, "k1", visa)

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
}

// A body that does not decode is refused under a finished key too, even
// though the key's answer is stored: only the bytes of the request that
// made the key are answered without being decoded.
func TestAnInvalidBodyUnderAFinishedKeyIsRefused(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)

	require.Equal(t, http.StatusCreated, svc.PostPayment(t, apiKey, "k", visa).Status)
	resp := svc.PostPayment(t, apiKey, "k", strings.Replace(visa, `"usd"`, `"USD"`, 1))
	requireProblem(t, resp, http.StatusBadRequest, "invalid-request")
	resp = svc.PostPayment(t, apiKey, "k", visa[:len(visa)-1])
	requireProblem(t, resp, http.StatusBadRequest, "invalid-request")
	require.Len(t, svc.Stripe.PaymentIntents(), 1)
}

func TestReorderedJSONIsTheSameRequest(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)

	first := svc.PostPayment(t, apiKey, "k", `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`)
	require.Equal(t, http.StatusCreated, first.Status)
	second := svc.PostPayment(t, apiKey, "k", "{ \"payment_method\" : \"pm_card_visa\",\n \"currency\":\"usd\", \"amount\": 2000 }")
	require.Equal(t, http.StatusCreated, second.Status, "body: %s", second.Body)
	require.Equal(t, "true", second.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.Body), string(second.Body))
	require.Len(t, svc.Stripe.PaymentIntents(), 1)
}

func TestNullDescriptionIsNoDescription(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	const (
		withNull = `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa","description":null}`
		without  = `{"amount":2000,"currency":"usd","payment_method":"pm_card_visa"}`
	)

	// Either way round: the retry is a replay, not a 422.
	for key, bodies := range map[string][2]string{"null-first": {withNull, without}, "absent-first": {without, withNull}} {
		first := svc.PostPayment(t, apiKey, key, bodies[0])
		require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
		retry := svc.PostPayment(t, apiKey, key, bodies[1])
		require.Equal(t, http.StatusCreated, retry.Status, "%s: %s", key, retry.Body)
		require.Equal(t, "true", retry.Header.Get("Idempotent-Replayed"))
		require.Equal(t, string(first.Body), string(retry.Body))
	}
	require.Len(t, svc.Stripe.PaymentIntents(), 2)

	// An empty description is a description.
	resp := svc.PostPayment(t, apiKey, "null-first", strings.Replace(withNull, "null", `""`, 1))
	requireProblem(t, resp, http.StatusUnprocessableEntity, "idempotency-key-reused")
}

func TestKeyReusedWithDifferentRequest(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)

	require.Equal(t, http.StatusCreated, svc.PostPayment(t, apiKey, "k", visa).Status)
	resp := svc.PostPayment(t, apiKey, "k", strings.Replace(visa, "2000", "2001", 1))
	requireProblem(t, resp, http.StatusUnprocessableEntity, "idempotency-key-reused")
	require.Len(t, svc.Stripe.PaymentIntents(), 1)
	require.EqualValues(t, 1, svc.Stripe.Stats().CreateRequests)
}

func TestQuotedAndBareKeyAreTheSameKey(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)

	first := svc.PostPayment(t, apiKey, `"order-7"`, visa)
	require.Equal(t, http.StatusCreated, first.Status)
	second := svc.PostPayment(t, apiKey, `order-7`, visa)
	require.Equal(t, "true", second.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.Body), string(second.Body))
	require.Len(t, svc.Stripe.PaymentIntents(), 1)
}

func TestKeyLength(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)

	requireProblem(t, svc.Do(t, http.MethodPost, "/payments", visa,
		"Authorization", "Bearer "+apiKey, "Content-Type", "application/json"), http.StatusBadRequest, "idempotency-key-missing")

	require.Equal(t, http.StatusCreated, svc.PostPayment(t, apiKey, strings.Repeat("a", 255), visa).Status)
	require.Equal(t, http.StatusCreated, svc.PostPayment(t, apiKey, `"`+strings.Repeat("b", 255)+`"`, visa).Status)
	requireProblem(t, svc.PostPayment(t, apiKey, strings.Repeat("c", 256), visa), http.StatusBadRequest, "idempotency-key-invalid")
	requireProblem(t, svc.PostPayment(t, apiKey, `"`+strings.Repeat("d", 256)+`"`, visa), http.StatusBadRequest, "idempotency-key-invalid")
	require.Len(t, svc.Stripe.PaymentIntents(), 2)
}

func TestUsersAreIndependent(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, alice := svc.NewUser(t)
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
}

func TestDeclineIsStoredAndReplayed(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	body := `{"amount": 500, "currency": "eur", "payment_method": "pm_card_chargeDeclined"}`

	first := svc.PostPayment(t, apiKey, "declined", body)
	p := requireProblem(t, first, http.StatusPaymentRequired, "card-declined")
	require.Equal(t, "generic_decline", p.DeclineCode)
	require.NotZero(t, p.PaymentID)

	second := svc.PostPayment(t, apiKey, "declined", body)
	require.Equal(t, http.StatusPaymentRequired, second.Status)
	require.Equal(t, "true", second.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.Body), string(second.Body))
	require.EqualValues(t, 1, svc.Stripe.Stats().CreateRequests)

	stored := svc.Do(t, http.MethodGet, "/payments/"+p.PaymentID, "", "Authorization", "Bearer "+apiKey)
	require.Equal(t, "failed", decode[payment](t, stored).Status)
	var failureCode string
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		"SELECT data->>'failure_code' FROM audit_records WHERE resource_id = $1 AND action = 'payment.failed'", rowID(t, svc, p.PaymentID)).Scan(&failureCode))
	require.Equal(t, "generic_decline", failureCode)
}

func TestUnknownPaymentMethodIsADefiniteRejection(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	body := `{"amount": 500, "currency": "usd", "payment_method": "pm_no_such_method"}`

	first := svc.PostPayment(t, apiKey, "rejected", body)
	requireProblem(t, first, http.StatusBadRequest, "payment-rejected")
	second := svc.PostPayment(t, apiKey, "rejected", body)
	require.Equal(t, "true", second.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.Body), string(second.Body))
	require.Empty(t, svc.Stripe.PaymentIntents())
}

func TestValidationErrorsAreNotStored(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)

	bad := svc.PostPayment(t, apiKey, "fix-me", `{"amount": 0, "currency": "USD", "payment_method": "pm_card_visa", "tip": 1}`)
	p := requireProblem(t, bad, http.StatusBadRequest, "invalid-request")
	var pointers []string
	for _, e := range p.Errors {
		pointers = append(pointers, e.Pointer)
	}
	require.Equal(t, []string{"/amount", "/currency", "/tip"}, pointers)

	good := svc.PostPayment(t, apiKey, "fix-me", visa)
	require.Equal(t, http.StatusCreated, good.Status, "body: %s", good.Body)
	require.Empty(t, good.Header.Get("Idempotent-Replayed"))
	require.Len(t, svc.Stripe.PaymentIntents(), 1)
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

func TestAuthAndMediaType(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)

	requireProblem(t, svc.Do(t, http.MethodPost, "/payments", visa, "Idempotency-Key", "k", "Content-Type", "application/json"),
		http.StatusUnauthorized, "unauthorized")
	requireProblem(t, svc.PostPayment(t, "pd_not_a_key", "k", visa), http.StatusUnauthorized, "unauthorized")
	requireProblem(t, svc.Do(t, http.MethodPost, "/payments", visa,
		"Authorization", "Bearer "+apiKey, "Idempotency-Key", "k", "Content-Type", "text/plain"),
		http.StatusUnsupportedMediaType, "unsupported-media-type")
	requireProblem(t, svc.PostPayment(t, apiKey, "k", `{"amount":1,"currency":"usd","payment_method":"pm_card_visa","description":"`+
		strings.Repeat("x", 1<<20)+`"}`), http.StatusRequestEntityTooLarge, "request-too-large")
	tooLarge, closed := postChunked(t, svc, apiKey, "k", `{"amount":1,"currency":"usd","payment_method":"pm_card_visa","description":"`+
		strings.Repeat("x", 1<<20)+`"}`)
	requireProblem(t, tooLarge, http.StatusRequestEntityTooLarge, "request-too-large")
	require.True(t, closed, "the rest of the body is not read: the connection closes")
	requireProblem(t, postTruncated(t, svc, apiKey, "k", visa), http.StatusBadRequest, "invalid-request")
	requireProblem(t, svc.Do(t, http.MethodDelete, "/payments", "", "Authorization", "Bearer "+apiKey),
		http.StatusMethodNotAllowed, "method-not-allowed")
	require.Empty(t, svc.Stripe.PaymentIntents())

	// The refused requests reserved nothing: the key is still fresh.
	require.Equal(t, http.StatusCreated, svc.PostPayment(t, apiKey, "k", visa).Status)
}

func splitHostPort(t *testing.T, addr string) (string, uint16) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.ParseUint(port, 10, 16)
	require.NoError(t, err)
	return host, uint16(n)
}

func stripefakeFault500() stripefake.Fault { return stripefake.Fault{Kind: stripefake.Fault500} }
