package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestBusyAccountReconcilesBySearchPastTheWindow: a key past its send
// window is decided by lookup alone. On an account making more than 10,000
// PaymentIntents in 70 minutes the consistent list cannot page the stretch
// search may not cover yet, so until search covers the key's last possible
// creation (the end of its window, less the visibility margin) the outcome
// stays unknown (503, nothing sent); once it does, search alone decides
// and the key adopts its charge, rather than answering 503 until
// LookupGrace hands it to an operator a day later.
func TestBusyAccountReconcilesBySearchPastTheWindow(t *testing.T) {
	t.Parallel()
	em := startSkewedEmulator(t, stripefake.Options{})
	svc := testutil.StartService(t, testutil.ServiceOptions{Emulator: em.Emulator, Workers: quietCompleter})
	_, apiKey := svc.NewUser(t)

	// The key's first send, 24h30m ago: a 500 that did charge.
	const age = 24*time.Hour + 30*time.Minute
	em.setOffset(-age)
	em.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged})
	requireProblem(t, svc.PostPayment(t, apiKey, "busy", visa), http.StatusServiceUnavailable, "processor-unavailable")
	charge := chargeOf(t, em)
	// The account's other traffic, 45 minutes ago (within the hour search
	// may lag): more than a lookup pages through.
	em.setOffset(-45 * time.Minute)
	em.CreateTraffic(10_050)
	em.setOffset(0)
	ageKey(t, svc, "busy", age)
	paid(t, svc, apiKey, "busy-today") // Stripe's clock measured as it is now

	// The window ended 30 minutes ago: a PaymentIntent created near its
	// end may not be in search yet (the service assumes a lag of up to an
	// hour), and the list is too long. Unknown, nothing sent.
	requireProblem(t, svc.PostPayment(t, apiKey, "busy", visa), http.StatusServiceUnavailable, "processor-unavailable")
	require.Len(t, em.PaymentIntents(), 2+10_050, "nothing charged")

	// 50 minutes later (in the database's record) search covers the
	// whole window and a margin: it alone decides.
	ageKey(t, svc, "busy", 50*time.Minute)
	resp := svc.PostPayment(t, apiKey, "busy", visa)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	require.Equal(t, charge, *decode[payment](t, resp).StripePaymentIntentID)
	require.Len(t, em.PaymentIntents(), 2+10_050, "adopted, not charged again")
}
