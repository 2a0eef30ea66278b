package api_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestRouter covers the router and the answers it writes itself.
func TestRouter(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		apiKey string
		userID int64
	}

	setup := func(t *testing.T) (*testutil.Service, *testBundle) {
		t.Helper()
		svc := testutil.StartService(t, testutil.ServiceOptions{})
		userID, apiKey := svc.NewUser(t)
		return svc, &testBundle{apiKey: apiKey, userID: userID}
	}

	// Every JSON answer the server writes ends with a newline, so `curl`
	// leaves the prompt on a line of its own. A stored response is replayed
	// byte for byte as it was stored, newline or not.
	t.Run("JSONAnswersEndWithANewline", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		auth := []string{"Authorization", "Bearer " + bundle.apiKey}

		created := svc.PostPayment(t, bundle.apiKey, "newline-1", visa)
		require.Equal(t, http.StatusCreated, created.Status)
		location := created.Header.Get("Location")

		for _, tc := range []struct {
			name   string
			resp   *testutil.Response
			status int
		}{
			{"healthz", svc.Do(t, http.MethodGet, "/healthz", ""), http.StatusOK},
			{"readyz", svc.Do(t, http.MethodGet, "/readyz", ""), http.StatusOK},
			{"a payment", svc.Do(t, http.MethodGet, location, "", auth...), http.StatusOK},
			{"not found", svc.Do(t, http.MethodGet, "/payments/999999", "", auth...), http.StatusNotFound},
			{"unauthorized", svc.Do(t, http.MethodGet, location, ""), http.StatusUnauthorized},
			{"invalid request", svc.PostPayment(t, bundle.apiKey, "newline-2", `{"amount": 0}`), http.StatusBadRequest},
			{"key reused", svc.PostPayment(t, bundle.apiKey, "newline-1", `{"amount": 1, "currency": "usd", "payment_method": "pm_card_visa"}`),
				http.StatusUnprocessableEntity},
		} {
			require.Equal(t, tc.status, tc.resp.Status, "%s: %s", tc.name, tc.resp.Body)
			require.True(t, bytes.HasSuffix(tc.resp.Body, []byte("}\n")), "%s: %q", tc.name, tc.resp.Body)
			require.Equal(t, 1, bytes.Count(tc.resp.Body, []byte("\n")), tc.name)
		}

		replay := svc.PostPayment(t, bundle.apiKey, "newline-1", visa)
		require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
		require.Equal(t, created.Body, replay.Body, "a replay is the stored bytes")
	})
}
