package api_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestKeyMadeBeforeTheHeartbeatSawTheLoss covers the stretch between a
// restore and the heartbeat that sees it.
//
// Defect: history_lost_at is when a heartbeat first saw the new oid or
// timeline, not when history was lost, and a key made before it is never
// looked up before its first send (stripeonce: KeyCreatedAt before
// LostHistoryAt). A lost key the client sends again as the restored
// database comes back, before the next heartbeat (5 s by default), is made
// "before the loss": on that run and on every later one, Stripe key 1 goes
// out to a Stripe that forgot it 25 hours ago, and charges again. Here its
// first run after the restore does not reach Stripe (a network blip); its
// retry comes after the heartbeat saw the loss, and is charged all the same.
func TestKeyMadeBeforeTheHeartbeatSawTheLoss(t *testing.T) {
	t.Parallel()
	em := startSkewedEmulator(t, stripefake.Options{SearchLag: time.Hour})
	var down atomic.Bool
	front := switchableFront(t, em.Emulator, func(*http.Request) bool { return down.Load() })
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: front, HeartbeatInterval: 50 * time.Millisecond,
		Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)

	em.setOffset(-25 * time.Hour)
	first := paid(t, svc, apiKey, "lost-in-restore")
	em.setOffset(0)

	// The restore: the key is gone. The client's retry arrives before a
	// heartbeat has looked; Stripe is unreachable for it.
	forgetEverything(t, svc)
	down.Store(true)
	requireProblem(t, svc.PostPayment(t, apiKey, "lost-in-restore", visa), http.StatusServiceUnavailable, "processor-unavailable")
	down.Store(false)

	// The restored database is a new one (pg_dump): the next heartbeat's
	// DeploymentObserveHistory sees another oid than the one recorded and
	// records the loss, as it would after a real restore.
	_, err := svc.Pool.Exec(context.Background(), "UPDATE deployment SET database_oid = database_oid + 1")
	require.NoError(t, err)
	testutil.WaitFor(t, 5*time.Second, 20*time.Millisecond, func() bool { return !svc.App.HistoryLostAt().IsZero() })

	resp := svc.PostPayment(t, apiKey, "lost-in-restore", visa)
	require.Equal(t, 1, len(em.PaymentIntents()),
		"the customer was charged twice for one intent: PaymentIntent %s 25 hours ago, and again now (answer %d %s)",
		*first.StripePaymentIntentID, resp.Status, resp.Body)
}
