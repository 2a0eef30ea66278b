package stripefake_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// refundListEnv makes two PaymentIntents and n refunds of 10, alternating
// between them (even ones of the first), created at t0, t0, t0, t0+1s,
// t0+2s, ... It returns the PaymentIntents and the refund ids in creation
// order.
func refundListEnv(t *testing.T, n int) (*env, time.Time, [2]*stripe.PaymentIntent, []string) {
	t.Helper()
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := newClock(t0.Add(100 * time.Millisecond))
	e := newEnv(t, stripefake.Options{Now: clock.Now})
	pis := [2]*stripe.PaymentIntent{paid(t, e, "pm_card_visa"), paid(t, e, "pm_card_pendingRefund")}
	ids := make([]string, n)
	for i := range n {
		if i >= 3 {
			clock.Add(time.Second)
		}
		rf, err := e.sc.Refunds.New(refundOf(pis[i%2].ID, 10, ""))
		require.NoError(t, err)
		ids[i] = rf.ID
	}
	return e, t0, pis, ids
}

// listRefunds collects what stripe-go's auto-paging iterator yields for p.
func listRefunds(t *testing.T, e *env, p *stripe.RefundListParams) []string {
	t.Helper()
	it := e.sc.Refunds.List(p)
	var out []string
	for it.Next() {
		out = append(out, it.Refund().ID)
	}
	require.NoError(t, it.Err())
	return out
}

// pick returns ids[i] for each i, in the given order.
func pick(ids []string, is ...int) []string {
	out := make([]string, len(is))
	for k, i := range is {
		out[k] = ids[i]
	}
	return out
}

func TestRefundListFiltersAndPages(t *testing.T) {
	t.Parallel()
	e, t0, pis, ids := refundListEnv(t, 9)
	page := stripe.ListParams{Limit: stripe.Int64(2)}

	before := e.fake.Stats().RefundLists
	require.Equal(t, newestFirst(ids, 0, 9), listRefunds(t, e, &stripe.RefundListParams{ListParams: page}))
	require.EqualValues(t, 5, e.fake.Stats().RefundLists-before)
	require.Equal(t, newestFirst(ids, 0, 9), listRefunds(t, e, nil))

	// payment_intent, charge.
	got := listRefunds(t, e, &stripe.RefundListParams{ListParams: page, PaymentIntent: stripe.String(pis[0].ID)})
	require.Equal(t, pick(ids, 8, 6, 4, 2, 0), got)
	got = listRefunds(t, e, &stripe.RefundListParams{ListParams: page, Charge: stripe.String(pis[1].LatestCharge.ID)})
	require.Equal(t, pick(ids, 7, 5, 3, 1), got)
	require.Empty(t, listRefunds(t, e, &stripe.RefundListParams{PaymentIntent: stripe.String("pi_nope")}))

	// created: ids[0..2] in second t0, ids[i] (i >= 3) in t0 + (i-2)s.
	got = listRefunds(t, e, &stripe.RefundListParams{ListParams: page, Created: stripe.Int64(t0.Unix())})
	require.Equal(t, pick(ids, 2, 1, 0), got)
	got = listRefunds(t, e, &stripe.RefundListParams{ListParams: page, PaymentIntent: stripe.String(pis[1].ID),
		CreatedRange: &stripe.RangeQueryParams{GreaterThan: t0.Unix(), LesserThanOrEqual: t0.Unix() + 3}})
	require.Equal(t, pick(ids, 5, 3), got)

	// Cursors, through stripe-go: backwards from ending_before it yields
	// oldest first.
	got = listRefunds(t, e, &stripe.RefundListParams{ListParams: stripe.ListParams{
		Limit: stripe.Int64(2), StartingAfter: stripe.String(ids[5]),
	}})
	require.Equal(t, newestFirst(ids, 0, 5), got)
	got = listRefunds(t, e, &stripe.RefundListParams{ListParams: stripe.ListParams{
		Limit: stripe.Int64(2), EndingBefore: stripe.String(ids[5]),
	}})
	require.Equal(t, ids[6:], got)

	// One page, and its wire shape.
	code, _, body := rawDo(t, e, http.MethodGet, "/v1/refunds?limit=2&payment_intent="+pis[1].ID, "Bearer sk_test_123", nil, nil)
	require.Equal(t, http.StatusOK, code, body)
	var res struct {
		Object  string `json:"object"`
		Data    []map[string]any
		HasMore bool   `json:"has_more"`
		URL     string `json:"url"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &res))
	require.Equal(t, "list", res.Object)
	require.Equal(t, "/v1/refunds", res.URL)
	require.True(t, res.HasMore)
	require.Len(t, res.Data, 2)
	require.Equal(t, ids[7], res.Data[0]["id"])
	require.Equal(t, "refund", res.Data[0]["object"])
	require.Equal(t, "pending", res.Data[0]["status"])
	require.Equal(t, pis[1].ID, res.Data[0]["payment_intent"])
	require.Equal(t, pis[1].LatestCharge.ID, res.Data[0]["charge"])
	require.Nil(t, res.Data[0]["reason"])
	require.NotContains(t, res.Data[0], "failure_reason")
}

// The list shows each refund's status as it is now.
func TestRefundListIsStronglyConsistent(t *testing.T) {
	t.Parallel()
	e, _, pis, ids := refundListEnv(t, 2)
	_, err := e.fake.SetRefundStatus(ids[1], stripefake.RefundFailed, "")
	require.NoError(t, err)
	it := e.sc.Refunds.List(&stripe.RefundListParams{PaymentIntent: stripe.String(pis[1].ID)})
	require.True(t, it.Next())
	require.Equal(t, stripe.RefundStatusFailed, it.Refund().Status)
	require.Equal(t, stripe.RefundFailureReasonExpiredOrCanceledCard, it.Refund().FailureReason)
	require.False(t, it.Next())
	require.NoError(t, it.Err())

	rf, err := e.sc.Refunds.New(refundOf(pis[0].ID, 5, ""))
	require.NoError(t, err)
	require.Equal(t, []string{rf.ID, ids[0]}, listRefunds(t, e, &stripe.RefundListParams{PaymentIntent: stripe.String(pis[0].ID)}))
}

func TestRefundListErrors(t *testing.T) {
	t.Parallel()
	e, _, _, ids := refundListEnv(t, 2)
	auth := "Bearer sk_test_123"

	for query, param := range map[string]string{
		"limit=0":                "limit",
		"limit=101":              "limit",
		"created[gte]=x":         "created[gte]",
		"status=succeeded":       "status",
		"customer=cus_1":         "customer",
		"starting_after=re_nope": "starting_after",
		"ending_before=re_nope":  "ending_before",
		"starting_after=" + ids[0] + "&ending_before=" + ids[1]: "ending_before",
	} {
		code, _, body := rawDo(t, e, http.MethodGet, "/v1/refunds?"+query, auth, nil, nil)
		require.Equal(t, http.StatusBadRequest, code, query)
		var env struct{ Error stripe.Error }
		require.NoError(t, json.Unmarshal([]byte(body), &env), query)
		require.Equal(t, stripe.ErrorTypeInvalidRequest, env.Error.Type, query)
		require.Equal(t, param, env.Error.Param, query)
	}

	it := e.sc.Refunds.List(&stripe.RefundListParams{ListParams: stripe.ListParams{StartingAfter: stripe.String("re_nope")}})
	require.False(t, it.Next())
	se := stripeErr(t, it.Err())
	require.Equal(t, stripe.ErrorCodeResourceMissing, se.Code)
	require.Equal(t, "No such refund: 're_nope'", se.Msg)

	code, _, _ := rawDo(t, e, http.MethodGet, "/v1/refunds?expand[0]=data.charge", auth, nil, nil)
	require.Equal(t, http.StatusOK, code)
	code, _, _ = rawDo(t, e, http.MethodGet, "/v1/refunds", "", nil, nil)
	require.Equal(t, http.StatusUnauthorized, code)
	require.EqualValues(t, 10, e.fake.Stats().RefundLists) // the 401 is not a list
}
