package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/cli"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// The operator's own commands on a key a Stripe event brought back from its
// tombstone: `keys list --state needs-attention` shows it, and `keys
// resolve ID --as charged --payment-intent PI` settles it. The commands read
// DATABASE_URL and STRIPE_API_BASE from the environment, so this test is
// not parallel (parallel tests wait until it is done).
func TestKeysCommandsOnAKeyBackFromItsTombstone(t *testing.T) {
	ctx := context.Background()
	em := testutil.StartEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em, WebhookSecret: whsec, Workers: quietCompleter})
	userID, apiKey := svc.NewUser(t)
	t.Setenv("DATABASE_URL", databaseURL(t, svc))
	t.Setenv("STRIPE_API_BASE", em.URL)

	em.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
	requireProblem(t, svc.PostPayment(t, apiKey, "late", visa), http.StatusServiceUnavailable, "needs-attention")
	_, err := svc.App.Resolver.NotCharged(ctx, keyID(t, svc, "late"))
	require.NoError(t, err)
	reapKeys(t, svc, 1)
	code, out, stderr := runCLI(t, "keys", "list", "--state", "needs-attention")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, out, "nothing awaits an operator yet")

	pi := plant(t, em, 2000, intentOf(t, svc, userID, "late").Metadata())
	_, payload := event("payment_intent.succeeded", stripeObject(t, svc, "/v1/payment_intents/"+pi.ID), time.Now())
	require.Equal(t, http.StatusOK, deliver(t, svc, payload, whsec, time.Now()).Status)

	code, out, stderr = runCLI(t, "keys", "list", "--state", "needs-attention")
	require.Equal(t, 0, code, stderr)
	require.NotEmpty(t, out, "keys list --state needs-attention shows the key")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 1, out)
	var line struct {
		ID             int64  `json:"id"`
		IdempotencyKey string `json:"idempotency_key"`
		Request        string `json:"request"`
		State          string `json:"state"`
		LastError      string `json:"last_error"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &line))
	require.Equal(t, "late", line.IdempotencyKey)
	require.Equal(t, "POST /payments", line.Request)
	require.Equal(t, "needs-attention", line.State)
	require.Contains(t, line.LastError, pi.ID)
	require.Contains(t, line.LastError, "its key was reaped and is back for an operator")

	code, out, stderr = runCLI(t, "keys", "resolve", strconv.FormatInt(line.ID, 10), "--as", "charged", "--payment-intent", pi.ID)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, `"status":201`)
	code, out, stderr = runCLI(t, "keys", "list", "--state", "needs-attention")
	require.Equal(t, 0, code, stderr)
	require.Empty(t, out)

	replay := svc.PostPayment(t, apiKey, "late", visa)
	require.Equal(t, http.StatusCreated, replay.Status, "body: %s", replay.Body)
	require.Equal(t, pi.ID, *decode[payment](t, replay).StripePaymentIntentID)
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code = cli.Run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// databaseURL is the URL of the service's database: the pool's config names
// the database apart from the URL it was parsed from.
func databaseURL(t *testing.T, svc *testutil.Service) string {
	t.Helper()
	u, err := url.Parse(testutil.AdminURL(t))
	require.NoError(t, err)
	u.Path = "/" + svc.Pool.Driver().Config().ConnConfig.Database
	return u.String()
}
