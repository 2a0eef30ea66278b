package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/stripefake"
	"github.com/paymentsd/paymentsd/internal/testutil"
)

func TestRefundPartThenTheRestThenNoMore(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay")

	first := postRefund(t, svc, apiKey, "r1", p.ID, `{"amount": 500, "reason": "requested_by_customer"}`)
	require.Equal(t, http.StatusCreated, first.Status, "body: %s", first.Body)
	r1 := decode[refund](t, first)
	require.Equal(t, refund{ID: r1.ID, PaymentID: p.ID, Amount: 500, Currency: "usd", Status: "succeeded",
		Reason: r1.Reason, StripeRefundID: r1.StripeRefundID}, r1)
	require.Equal(t, "requested_by_customer", *r1.Reason)
	require.Equal(t, "/refunds/"+r1.ID, first.Header.Get("Location"))
	got := svc.Do(t, http.MethodGet, first.Header.Get("Location"), "", "Authorization", "Bearer "+apiKey)
	require.Equal(t, http.StatusOK, got.Status)
	require.JSONEq(t, string(first.Body), string(got.Body))
	require.EqualValues(t, 500, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"])

	replay := postRefund(t, svc, apiKey, "r1", p.ID, `{"reason": "requested_by_customer", "amount": 500}`)
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.Equal(t, string(first.Body), string(replay.Body))

	rest := postRefund(t, svc, apiKey, "r2", p.ID, `{}`)
	require.Equal(t, http.StatusCreated, rest.Status, "body: %s", rest.Body)
	require.EqualValues(t, 1500, decode[refund](t, rest).Amount, "no amount: all that remains")
	require.EqualValues(t, 2000, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"])

	more := postRefund(t, svc, apiKey, "r3", p.ID, `{"amount": 1}`)
	prob := requireProblem(t, more, http.StatusBadRequest, "refund-exceeds-payment")
	require.Equal(t, p.ID, prob.PaymentID)
	again := postRefund(t, svc, apiKey, "r3", p.ID, `{"amount": 1}`)
	require.Equal(t, "true", again.Header.Get("Idempotent-Replayed"), "a refusal is stored")

	refunds := svc.Stripe.Refunds()
	require.Len(t, refunds, 2)
	var total int64
	for _, r := range refunds {
		total += r.Amount
	}
	require.EqualValues(t, 2000, total, "Stripe was never asked for more than the payment")
}

// Twenty concurrent refunds of a tenth of a payment, each under its own
// key: exactly ten are made, ten are refused, and Stripe refunds exactly
// the payment.
func TestConcurrentRefundsNeverOverRefund(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay")

	var waits []func() *testutil.Response
	for i := range 20 {
		waits = append(waits, testutil.Go(t, func(t testing.TB) *testutil.Response {
			return postRefund(t, svc, apiKey, fmt.Sprintf("tenth-%d", i), p.ID, `{"amount": 200}`)
		}))
	}
	answers := map[int]int{}
	for _, wait := range waits {
		answers[wait().Status]++
	}
	require.Equal(t, map[int]int{http.StatusCreated: 10, http.StatusBadRequest: 10}, answers)
	require.Len(t, svc.Stripe.Refunds(), 10)
	require.EqualValues(t, 2000, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"])
	var refused int
	require.NoError(t, svc.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM idempotency_keys WHERE convert_from(response_body, 'UTF8') LIKE '%refund-exceeds-payment%'`).Scan(&refused))
	require.Equal(t, 10, refused, "every refusal is stored as refund-exceeds-payment")
}

func TestRefundRefusalsAndScope(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	_, otherKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay")

	declined := svc.PostPayment(t, apiKey, "declined", `{"amount": 900, "currency": "usd", "payment_method": "pm_card_chargeDeclined"}`)
	require.Equal(t, http.StatusPaymentRequired, declined.Status)
	failedID := decode[problemBody](t, declined).PaymentID
	requireProblem(t, postRefund(t, svc, apiKey, "of-declined", failedID, `{}`), http.StatusBadRequest, "payment-not-refundable")

	// Another user's payment, or none: 404, and nothing stored, so the key
	// stays free for the caller's own payment.
	requireProblem(t, postRefund(t, svc, otherKey, "mine", p.ID, `{}`), http.StatusNotFound, "not-found")
	requireProblem(t, postRefund(t, svc, apiKey, "nowhere", ids.Format(ids.Payment, ids.New()), `{}`), http.StatusNotFound, "not-found")
	requireProblem(t, postRefund(t, svc, apiKey, "nowhere", "999999", `{}`), http.StatusNotFound, "not-found")
	require.Equal(t, http.StatusCreated, postRefund(t, svc, apiKey, "nowhere", p.ID, `{"amount": 100}`).Status)

	// One key and body sent to two payments are two requests.
	p2 := paid(t, svc, apiKey, "pay-2")
	requireProblem(t, postRefund(t, svc, apiKey, "nowhere", p2.ID, `{"amount": 100}`), http.StatusUnprocessableEntity, "idempotency-key-reused")
	// The digest covers the path as sent, which the router reads: the same
	// id written with escapes is no id, and is refused, not replayed.
	var escaped strings.Builder
	for _, c := range p.ID {
		fmt.Fprintf(&escaped, "%%%02X", c)
	}
	requireProblem(t, svc.Do(t, http.MethodPost, "/payments/"+escaped.String()+"/refunds", `{"amount": 100}`,
		"Authorization", "Bearer "+apiKey, "Idempotency-Key", "nowhere", "Content-Type", "application/json"),
		http.StatusBadRequest, "invalid-request")

	for _, body := range []string{`{"amount": 0}`, `{"amount": "5"}`, `{"reason": "because"}`, `{"tip": 1}`, `[]`} {
		requireProblem(t, postRefund(t, svc, apiKey, "bad", p.ID, body), http.StatusBadRequest, "invalid-request")
	}
	requireProblem(t, svc.Do(t, http.MethodPost, "/payments/abc/refunds", `{}`, "Authorization", "Bearer "+apiKey,
		"Idempotency-Key", "bad", "Content-Type", "application/json"), http.StatusBadRequest, "invalid-request")
	require.Len(t, svc.Stripe.Refunds(), 1)
}

// A refund's indeterminate 500 that did refund is adopted, never made twice;
// a refund that fails at Stripe gives its amount back.
func TestRefundOutcomesFromStripe(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay")

	svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.Fault500Charged})
	requireProblem(t, postRefund(t, svc, apiKey, "r1", p.ID, `{"amount": 700}`), http.StatusServiceUnavailable, "processor-unavailable")
	require.Len(t, svc.Stripe.Refunds(), 1, "the 500 did refund")
	resp := postRefund(t, svc, apiKey, "r1", p.ID, `{"amount": 700}`)
	require.Equal(t, http.StatusCreated, resp.Status, "body: %s", resp.Body)
	require.Equal(t, svc.Stripe.Refunds()[0].ID, *decode[refund](t, resp).StripeRefundID)
	require.Len(t, svc.Stripe.Refunds(), 1, "adopted, not made twice")

	// A pending refund holds its amount: it counts against the payment,
	// though Stripe has not refunded it yet.
	require.NoError(t, svc.Stripe.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{Status: stripefake.RefundPending}))
	pending := postRefund(t, svc, apiKey, "r2", p.ID, `{"amount": 600}`)
	require.Equal(t, http.StatusCreated, pending.Status, "body: %s", pending.Body)
	require.Equal(t, "pending", decode[refund](t, pending).Status)
	require.EqualValues(t, 700, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"])
	require.NoError(t, svc.Stripe.SetRefundOutcome(*p.StripePaymentIntentID, stripefake.RefundOutcome{}))

	// Refunded behind our back (in Stripe's dashboard, say): Stripe refuses
	// more than it holds, the refusal is stored, and the refused refund
	// gives its amount back.
	behind := &stripe.RefundParams{PaymentIntent: p.StripePaymentIntentID, Amount: stripe.Int64(500)}
	_, err := stripeClient(&testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL}).Refunds.New(behind)
	require.NoError(t, err)
	refused := postRefund(t, svc, apiKey, "r3", p.ID, `{}`)
	prob := requireProblem(t, refused, http.StatusBadRequest, "refund-rejected")
	require.Equal(t, p.ID, prob.PaymentID)
	rest := postRefund(t, svc, apiKey, "r4", p.ID, `{"amount": 200}`)
	require.Equal(t, http.StatusCreated, rest.Status, "the refused 700 was given back; body: %s", rest.Body)
	require.EqualValues(t, 900, getPaymentOf(t, svc, apiKey, p.ID)["amount_refunded"])
}

func TestListsPageNewestFirstAndStayScoped(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	_, otherKey := svc.NewUser(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, paid(t, svc, apiKey, fmt.Sprintf("p%d", i)).ID)
	}
	paid(t, svc, otherKey, "theirs")
	auth := "Bearer " + apiKey
	type page struct {
		Object  string    `json:"object"`
		Data    []payment `json:"data"`
		HasMore bool      `json:"has_more"`
		URL     string    `json:"url"`
	}
	idsOf := func(p page) []string {
		var out []string
		for _, d := range p.Data {
			out = append(out, d.ID)
		}
		return out
	}
	first := decode[page](t, svc.Do(t, http.MethodGet, "/payments?limit=2", "", "Authorization", auth))
	require.Equal(t, "list", first.Object)
	require.Equal(t, []string{ids[4], ids[3]}, idsOf(first))
	require.True(t, first.HasMore)
	next := decode[page](t, svc.Do(t, http.MethodGet, "/payments?limit=2&starting_after="+ids[3], "", "Authorization", auth))
	require.Equal(t, []string{ids[2], ids[1]}, idsOf(next))
	last := decode[page](t, svc.Do(t, http.MethodGet, "/payments?limit=2&starting_after="+ids[1], "", "Authorization", auth))
	require.Equal(t, []string{ids[0]}, idsOf(last))
	require.False(t, last.HasMore)
	back := decode[page](t, svc.Do(t, http.MethodGet, "/payments?limit=2&ending_before="+ids[1], "", "Authorization", auth))
	require.Equal(t, []string{ids[3], ids[2]}, idsOf(back), "newer ones, still newest first")
	require.True(t, back.HasMore)
	all := decode[page](t, svc.Do(t, http.MethodGet, "/payments", "", "Authorization", auth))
	require.Len(t, all.Data, 5, "only the caller's")

	for _, q := range []string{"limit=0", "limit=101", "limit=x", "starting_after=-1", "starting_after=1&ending_before=2", "sort=asc"} {
		requireProblem(t, svc.Do(t, http.MethodGet, "/payments?"+q, "", "Authorization", auth), http.StatusBadRequest, "invalid-request")
	}

	require.Equal(t, http.StatusCreated, postRefund(t, svc, apiKey, "r1", ids[0], `{"amount": 100}`).Status)
	require.Equal(t, http.StatusCreated, postRefund(t, svc, apiKey, "r2", ids[0], `{"amount": 200}`).Status)
	type refundPage struct {
		Data    []refund `json:"data"`
		HasMore bool     `json:"has_more"`
		URL     string   `json:"url"`
	}
	rp := decode[refundPage](t, svc.Do(t, http.MethodGet, "/payments/"+ids[0]+"/refunds", "", "Authorization", auth))
	require.Len(t, rp.Data, 2)
	require.EqualValues(t, 200, rp.Data[0].Amount, "newest first")
	require.Equal(t, "/payments/"+ids[0]+"/refunds", rp.URL)
	requireProblem(t, svc.Do(t, http.MethodGet, "/payments/"+ids[0]+"/refunds", "", "Authorization", "Bearer "+otherKey),
		http.StatusNotFound, "not-found")
	requireProblem(t, svc.Do(t, http.MethodGet, "/refunds/"+rp.Data[0].ID, "", "Authorization", "Bearer "+otherKey),
		http.StatusNotFound, "not-found")
}

// A refund key that needs an operator is settled through the same command
// as a payment's: as refunded by a Stripe Refund that matches it, or as not
// refunded once Stripe shows none, which gives its amount back.
func TestOperatorResolvesARefundKey(t *testing.T) {
	t.Parallel()
	svc := testutil.StartService(t, testutil.ServiceOptions{})
	_, apiKey := svc.NewUser(t)
	p := paid(t, svc, apiKey, "pay")
	for _, key := range []string{"parked-1", "parked-2"} {
		svc.Stripe.Inject(stripefake.Fault{Kind: stripefake.FaultIdempotencyError})
		requireProblem(t, postRefund(t, svc, apiKey, key, p.ID, `{"amount": 600}`), http.StatusServiceUnavailable, "needs-attention")
	}
	require.Empty(t, svc.Stripe.Refunds())

	// Refunded by hand in the dashboard: the operator names that Refund.
	byHand, err := stripeClient(&testutil.Emulator{Server: svc.Stripe, URL: svc.StripeURL}).Refunds.New(
		&stripe.RefundParams{PaymentIntent: p.StripePaymentIntentID, Amount: stripe.Int64(600)})
	require.NoError(t, err)
	_, err = svc.App.Resolve(context.Background(), keyID(t, svc, "parked-1"), "re_doesnotexist")
	require.Error(t, err)
	settled, err := svc.App.Resolve(context.Background(), keyID(t, svc, "parked-1"), byHand.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, settled.Status)
	replay := postRefund(t, svc, apiKey, "parked-1", p.ID, `{"amount": 600}`)
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.Equal(t, byHand.ID, *decode[refund](t, replay).StripeRefundID)

	settled, err = svc.App.Resolve(context.Background(), keyID(t, svc, "parked-2"), "")
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, settled.Status)
	requireProblem(t, postRefund(t, svc, apiKey, "parked-2", p.ID, `{"amount": 600}`), http.StatusBadRequest, "refund-rejected")
	rest := postRefund(t, svc, apiKey, "rest", p.ID, `{}`)
	require.Equal(t, http.StatusCreated, rest.Status, "body: %s", rest.Body)
	require.EqualValues(t, 1400, decode[refund](t, rest).Amount, "the unrefunded 600 was given back")
}
