package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestLookupsTrustingSearchLagAreVisible: SearchLag (1 h) is an assumption
// Stripe does not document. A lookup whose "nothing found" rests on it
// (search alone covered time since the key was made) is counted and logged
// with what it assumed; one whose consistent list covered the key's whole
// life is not.
func TestLookupsTrustingSearchLagAreVisible(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, HeartbeatInterval: 50 * time.Millisecond,
		Workers: quietCompleter, LogWriter: &logs})
	_, apiKey := svc.NewUser(t)

	// A fresh key's spent attempt: the list covers all of its life.
	em.Inject(stripefake.Fault{Kind: stripefake.Fault500})
	requireProblem(t, svc.PostPayment(t, apiKey, "fresh", visa), http.StatusServiceUnavailable, "processor-unavailable")
	// The retry finds the key spent, looks up, finds nothing, and (the
	// test's visibility margin being short) charges under the next key.
	paid(t, svc, apiKey, "fresh")
	requireMetric(t, svc, `paymentsd_reconciliations_total{result="not_found"} 1`)
	requireMetric(t, svc, `paymentsd_lookups_trusting_search_lag_total{result="not_found"} 0`)

	// After a history loss a new key is looked up before its first send:
	// what a lost send made before the list's reach, search alone covers.
	_, err := svc.Pool.Exec(context.Background(), "UPDATE deployment SET history_lost_at = now() - interval '1 minute'")
	require.NoError(t, err)
	testutil.WaitFor(t, 5*time.Second, 20*time.Millisecond, func() bool { return !svc.App.HistoryLostAt().IsZero() })
	paid(t, svc, apiKey, "after-loss")
	requireMetric(t, svc, `paymentsd_reconciliations_total{result="not_found"} 2`)
	requireMetric(t, svc, `paymentsd_lookups_trusting_search_lag_total{result="not_found"} 1`)
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "trusted Stripe's search") {
			line = l
		}
	}
	require.NotEmpty(t, line, "the lookup that trusted the search lag is logged")
	require.Contains(t, line, `"search_lag":"1h0m0s"`)
	require.Contains(t, line, `"search_only_before":`)
	require.Contains(t, line, `"idempotency_key":"after-loss"`, "the operator can tell which key")
}
