package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// The operator's commands, against a real database and the emulator. Like
// the test above, this one sets the environment and is not parallel.
func TestKeysListAndResolve(t *testing.T) {
	url := testutil.NewEmptyDB(t)
	em := testutil.StartEmulator(t, stripefake.Options{})
	t.Setenv("DATABASE_URL", url)
	t.Setenv("STRIPE_API_BASE", em.URL)
	code, _, stderr := run(t, "migrate")
	require.Equal(t, 0, code, stderr)
	code, _, stderr = run(t, "users", "create", "--email", "ops@example.com")
	require.Equal(t, 0, code, stderr)

	// One key parked for an operator, one merely unfinished.
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	parked := parkedKey(t, conn, "stuck", "Stripe refused key 1: idempotency_error")
	_, err = conn.Exec(context.Background(), `INSERT INTO idempotency_keys (user_id, idempotency_key, flow, request_method,
		request_path, request_params, request_fingerprint) VALUES (1, 'young', 'payment', 'POST', '/payments', '{}', $1)`, make([]byte, 32))
	require.NoError(t, err)

	lines := listKeys(t, "keys", "list")
	require.Len(t, lines, 2)
	lines = listKeys(t, "keys", "list", "--state", "needs-attention", "--user", "1")
	require.Len(t, lines, 1)
	require.EqualValues(t, parked, lines[0]["id"])
	require.Equal(t, "stuck", lines[0]["idempotency_key"])
	require.Equal(t, "needs-attention", lines[0]["state"])
	require.Equal(t, "payment_created", lines[0]["recovery_point"])
	require.Equal(t, "Stripe refused key 1: idempotency_error", lines[0]["last_error"])
	require.Contains(t, lines[0], "age")
	require.Contains(t, lines[0], "runs")
	require.Empty(t, listKeys(t, "keys", "list", "--user", "2"))

	for _, bad := range [][]string{
		{"keys"}, {"keys", "list", "--state", "stale"}, {"keys", "resolve"}, {"keys", "resolve", "x", "--as", "not-charged"},
		{"keys", "resolve", "1", "--as", "charged"}, {"keys", "resolve", "1", "--as", "not-charged", "--payment-intent", "pi_x"},
	} {
		code, _, _ := run(t, bad...)
		require.Equal(t, 2, code, "%v", bad)
	}

	id := strconv.FormatInt(parked, 10)
	code, _, stderr = run(t, "keys", "resolve", id, "--as", "charged", "--payment-intent", "pi_missing")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no PaymentIntent pi_missing")

	code, stdout, stderr := run(t, "keys", "resolve", id, "--as", "not-charged")
	require.Equal(t, 0, code, stderr)
	var resolved struct {
		ID     int64           `json:"id"`
		Status int             `json:"status"`
		Body   json.RawMessage `json:"body"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &resolved))
	require.Equal(t, 400, resolved.Status)
	require.Contains(t, string(resolved.Body), `"processor_code":"not_charged"`)
	require.Empty(t, listKeys(t, "keys", "list", "--state", "needs-attention"))

	code, _, stderr = run(t, "keys", "resolve", id, "--as", "not-charged")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "does not await an operator")
}

// parkedKey inserts user 1's key parked at payment_created an hour ago with
// its pending payment, as a run that met an idempotency_error leaves it.
func parkedKey(t *testing.T, conn *pgx.Conn, key, why string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, conn.QueryRow(context.Background(), `INSERT INTO idempotency_keys (user_id, idempotency_key, flow,
		request_method, request_path, request_params, request_fingerprint, recovery_point, needs_attention_at,
		needs_attention_kind, last_error, created_at, last_run_at)
		VALUES (1, $1, 'payment', 'POST', '/payments', '{}', $2, 'payment_created', now(), 'unknown_outcome', $3,
		now() - interval '1 hour', now() - interval '1 hour') RETURNING id`,
		key, make([]byte, 32), why).Scan(&id))
	_, err := conn.Exec(context.Background(), `INSERT INTO payments (user_id, idempotency_key_id, amount, currency,
		payment_method) VALUES (1, $1, 2000, 'usd', 'pm_card_visa')`, id)
	require.NoError(t, err)
	return id
}

// listKeys runs a keys list and decodes its JSON lines.
func listKeys(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	code, stdout, stderr := run(t, args...)
	require.Equal(t, 0, code, stderr)
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var line map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &line), sc.Text())
		out = append(out, line)
	}
	return out
}
