package stripefake_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// postJSON posts body to an admin endpoint.
func postJSON(t *testing.T, e *env, path, body string) (int, string) {
	t.Helper()
	resp, err := e.srv.Client().Post(e.srv.URL+path, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	var sb strings.Builder
	_, err = io.Copy(&sb, resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, sb.String()
}

func TestAdminEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	code, _ := postJSON(t, e, "/_fake/faults", `{"inject":[{"kind":"500"},{"kind":"hang"},{"kind":"latency","latency_ms":1}]}`)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, 3, e.fake.PendingFaults())

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "admin-1"))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)

	done := make(chan error, 1)
	go func() {
		_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "2", "admin-2"))
		done <- err
	}()
	require.Eventually(t, func() bool { return e.fake.Stats().HungNow == 1 }, 5*time.Second, time.Millisecond)
	code, _ = postJSON(t, e, "/_fake/release", ``)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, <-done)

	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "3", "admin-3"))
	require.NoError(t, err)

	code, _, body := rawDo(t, e, http.MethodGet, "/_fake/stats", "", nil, nil)
	require.Equal(t, http.StatusOK, code)
	var st stripefake.Stats
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Equal(t, e.fake.Stats(), st)
	require.EqualValues(t, 3, st.CreateRequests)
	require.EqualValues(t, 2, st.PaymentIntentsCreated)
	require.EqualValues(t, 1, st.Faults500)
	require.EqualValues(t, 1, st.Hangs)
	require.EqualValues(t, 1, st.Latencies)
	require.Contains(t, body, `"payment_intents_created":2`)

	code, _, body = rawDo(t, e, http.MethodGet, "/_fake/payment_intents", "", nil, nil)
	require.Equal(t, http.StatusOK, code)
	var pis []stripefake.PaymentIntent
	require.NoError(t, json.Unmarshal([]byte(body), &pis))
	require.Len(t, pis, 2)
	require.Equal(t, "2", pis[0].Metadata["payment_id"])
	require.Equal(t, "admin-3", pis[1].IdempotencyKey)
	require.Equal(t, e.fake.PaymentIntents()[1].ID, pis[1].ID)

	// Chaos on, then off with "chaos":{}.
	code, body = postJSON(t, e, "/_fake/faults", `{"chaos":{"p_500":1}}`)
	require.Equal(t, http.StatusOK, code, body)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "4", ""))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	code, _ = postJSON(t, e, "/_fake/faults", `{"chaos":{}}`)
	require.Equal(t, http.StatusOK, code)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "5", ""))
	require.NoError(t, err)

	for _, bad := range []string{
		`{"inject":[{"kind":"boom"}]}`, `{"inject":[{}]}`, `{"chaos":{"p_500":2}}`,
		`{"chaos":{"p_500":0.6,"p_hang":0.6}}`, `{"chaos":{"latency_ms":5,"max_latency_ms":1}}`,
		`{"unknown":1}`, `not json`,
	} {
		code, _ := postJSON(t, e, "/_fake/faults", bad)
		require.Equal(t, http.StatusBadRequest, code, bad)
	}
	require.Equal(t, 0, e.fake.PendingFaults())
}

func TestAdminNewFaultKindsAndChaosSettings(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	code, body := postJSON(t, e, "/_fake/faults",
		`{"inject":[{"kind":"500_charged"},{"kind":"idempotency_error"},{"kind":"outlive_client","latency_ms":1}]}`)
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, 3, e.fake.PendingFaults())

	_, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "1", "adm-1"))
	require.Equal(t, http.StatusInternalServerError, stripeErr(t, err).HTTPStatusCode)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "2", "adm-2"))
	require.Equal(t, stripe.ErrorTypeIdempotency, stripeErr(t, err).Type)
	_, err = e.sc.PaymentIntents.New(piParams("pm_card_visa", "3", "adm-3"))
	require.NoError(t, err)
	st := e.fake.Stats()
	require.EqualValues(t, 1, st.Faults500Charged)
	require.EqualValues(t, 1, st.FaultsIdempotencyError)
	require.EqualValues(t, 1, st.OutliveClients)
	require.EqualValues(t, 2, st.PaymentIntentsCreated)

	_, _, raw := rawDo(t, e, http.MethodGet, "/_fake/stats", "", nil, nil)
	for _, name := range []string{"faults_500_charged", "faults_idempotency_error", "outlive_clients", "clients_gone",
		"executing_now", "searches_lagged", "lists"} {
		require.Contains(t, raw, `"`+name+`":`)
	}

	// Every chaos setting round-trips through the answer.
	all := `{"p_500":0.1,"p_lost_answer":0.1,"p_hang":0.1,"p_500_charged":0.2,"p_idempotency_error":0.2,` +
		`"p_outlive_client":0.3,"latency_ms":1,"max_latency_ms":2,"hang_for_ms":3,"outlive_latency_ms":4000,"search_lag_ms":2000}`
	code, body = postJSON(t, e, "/_fake/faults", `{"chaos":`+all+`}`)
	require.Equal(t, http.StatusOK, code, body)
	var resp stripefake.AdminFaultsResponse
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	want := stripefake.AdminChaos{
		P500: 0.1, PLostAnswer: 0.1, PHang: 0.1, P500Charged: 0.2, PIdempotencyError: 0.2, POutliveClient: 0.3,
		LatencyMS: 1, MaxLatencyMS: 2, HangForMS: 3, OutliveLatencyMS: 4000, SearchLagMS: 2000,
	}
	require.Equal(t, want, resp.Chaos)
	c, err := want.Chaos()
	require.NoError(t, err)
	require.Equal(t, 4*time.Second, c.OutliveLatency)
	require.Equal(t, 2*time.Second, c.SearchLag)

	// The search lag from chaos applies at once and goes with "chaos":{}.
	code, _ = postJSON(t, e, "/_fake/faults", `{"chaos":{"search_lag_ms":60000}}`)
	require.Equal(t, http.StatusOK, code)
	require.Empty(t, search(t, e, "metadata['payment_id']:'3'"))
	code, _ = postJSON(t, e, "/_fake/faults", `{"chaos":{}}`)
	require.Equal(t, http.StatusOK, code)
	require.Len(t, search(t, e, "metadata['payment_id']:'3'"), 1)

	for _, bad := range []string{
		`{"inject":[{"kind":"outlive_client"}]}`,
		`{"inject":[{"kind":"500_charged","latency_ms":-1}]}`,
		`{"chaos":{"p_500_charged":1.5}}`,
		`{"chaos":{"p_idempotency_error":-0.1}}`,
		`{"chaos":{"p_500":0.5,"p_500_charged":0.3,"p_outlive_client":0.3,"outlive_latency_ms":1}}`,
		`{"chaos":{"p_outlive_client":0.1}}`,
		`{"chaos":{"search_lag_ms":-1}}`,
		`{"chaos":{"outlive_latency_ms":-1}}`,
	} {
		code, body := postJSON(t, e, "/_fake/faults", bad)
		require.Equal(t, http.StatusBadRequest, code, bad)
		require.Contains(t, body, `"type":"invalid_request_error"`, bad)
	}
	require.Equal(t, 0, e.fake.PendingFaults())
}
