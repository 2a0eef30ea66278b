package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestMiddleware covers what every request goes through: its access log
// line and its metrics.
func TestMiddleware(t *testing.T) {
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

	t.Run("MetricsExposeOutcomes", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)

		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "m1", visa).Status)
		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "m1", visa).Status)
		require.Equal(t, http.StatusUnprocessableEntity, svc.PostPayment(t, bundle.apiKey, "m1", `{"amount":1,"currency":"usd","payment_method":"pm_card_visa"}`).Status)
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500})
		require.Equal(t, http.StatusServiceUnavailable, svc.PostPayment(t, bundle.apiKey, "m2", visa).Status)
		for i := range 3 { // methods no route serves: one series, however many there are
			require.Equal(t, http.StatusMethodNotAllowed, svc.Do(t, fmt.Sprint("M", i), "/payments", "").Status)
		}

		resp := svc.Do(t, http.MethodGet, "/metrics", "")
		require.Equal(t, http.StatusOK, resp.Status)
		body := string(resp.Body)
		for _, want := range []string{
			`paymentsd_idempotency_outcomes_total{flow="payment",outcome="created"} 1`,
			`paymentsd_idempotency_outcomes_total{flow="payment",outcome="replayed"} 1`,
			`paymentsd_idempotency_outcomes_total{flow="payment",outcome="key_reused"} 1`,
			`paymentsd_idempotency_outcomes_total{flow="payment",outcome="ambiguous"} 1`,
			`paymentsd_http_requests_total{method="POST",route="/payments",status="201"} 2`,
			`paymentsd_http_requests_total{method="other",route="unmatched",status="405"} 3`,
			`paymentsd_phase_duration_seconds_count{kind="call",recovery_point="payment_created"} 2`,
			`paymentsd_phase_duration_seconds_count{kind="tx",recovery_point="finished"} 1`,
			`paymentsd_unfinished_keys 1`,
			`paymentsd_keys_awaiting_reconciliation 0`,
			`paymentsd_oldest_unfinished_key_age_seconds`,
			`paymentsd_lease_takeovers_total 0`,
			`paymentsd_completer_resumes_total{outcome="finished"} 0`,
			`paymentsd_reconciliations_total{result="adopted"} 0`,
			`paymentsd_reaped_keys_total 0`,
		} {
			require.True(t, strings.Contains(body, want), "/metrics lacks %s", want)
		}
	})

	t.Run("LogsCarryNoSecrets", func(t *testing.T) {
		t.Parallel()
		var logs syncBuffer
		svc, bundle := setupWith(t, testutil.ServiceOptions{LogWriter: &logs})
		const secretDescription = "gift for Alice, card 4242424242424242"
		body := `{"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "description": "` + secretDescription + `"}`

		require.Equal(t, http.StatusCreated, svc.PostPayment(t, bundle.apiKey, "log-1", body).Status)
		require.Equal(t, http.StatusPaymentRequired, svc.PostPayment(t, bundle.apiKey, "log-2", strings.Replace(body, "pm_card_visa", "pm_card_chargeDeclined", 1)).Status)
		require.Equal(t, http.StatusUnauthorized, svc.PostPayment(t, bundle.apiKey+"x", "log-3", body).Status)
		require.Equal(t, http.StatusBadRequest, svc.PostPayment(t, bundle.apiKey, "log-4", `{"amount": "`+secretDescription+`"}`).Status)

		out := logs.String()
		for _, secret := range []string{bundle.apiKey, secretDescription, "4242424242424242", "pm_card_visa", "sk_test"} {
			require.NotContains(t, out, secret)
		}

		// One access line per request, with what an operator needs.
		var lines []map[string]any
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m), "log line: %s", line)
			if m["message"] == "request" {
				lines = append(lines, m)
			}
		}
		require.Len(t, lines, 4)
		first := lines[0]
		for _, field := range []string{"request_id", "user_id", "idempotency_key", "recovery_point", "status", "duration", "route"} {
			require.Contains(t, first, field)
		}
		require.Equal(t, "log-1", first["idempotency_key"])
		require.Equal(t, "finished", first["recovery_point"])
		require.Contains(t, out, `"message":"phase committed"`, "phase transitions at debug")
	})
}
