package stripefake_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// listEnv creates PaymentIntents at t0+0s, t0+0s, t0+0s, t0+1s, t0+2s, ...
// so that three share a second, and returns their ids in creation order.
func listEnv(t *testing.T, n int) (*env, time.Time, []string) {
	t.Helper()
	t0 := time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)
	clock := newClock(t0.Add(100 * time.Millisecond))
	e := newEnv(t, stripefake.Options{Now: clock.Now})
	ids := make([]string, n)
	for i := range n {
		if i >= 3 {
			clock.Add(time.Second)
		}
		pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", fmt.Sprint(i), ""))
		require.NoError(t, err)
		ids[i] = pi.ID
	}
	return e, t0, ids
}

// list collects what stripe-go's auto-paging iterator yields for p.
func list(t *testing.T, e *env, p *stripe.PaymentIntentListParams) []string {
	t.Helper()
	it := e.sc.PaymentIntents.List(p)
	var out []string
	for it.Next() {
		out = append(out, it.PaymentIntent().ID)
	}
	require.NoError(t, it.Err())
	return out
}

// newestFirst returns ids[from:to] reversed.
func newestFirst(ids []string, from, to int) []string {
	out := slices.Clone(ids[from:to])
	slices.Reverse(out)
	return out
}

func TestListAutoPagesNewestFirst(t *testing.T) {
	t.Parallel()
	e, _, ids := listEnv(t, 25)

	before := e.fake.Stats().Lists
	got := list(t, e, &stripe.PaymentIntentListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(3)}})
	require.Equal(t, newestFirst(ids, 0, 25), got)
	require.EqualValues(t, 9, e.fake.Stats().Lists-before) // ceil(25/3) pages

	// Default limit 10, and the three created in one second keep their order.
	require.Equal(t, newestFirst(ids, 0, 25), list(t, e, nil))
	got = list(t, e, &stripe.PaymentIntentListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(1)}})
	require.Equal(t, []string{ids[2], ids[1], ids[0]}, got[22:])
}

func TestListCreatedFilters(t *testing.T) {
	t.Parallel()
	e, t0, ids := listEnv(t, 12)
	// ids[0..2] were created in second t0, ids[i] (i >= 3) in t0 + (i-2)s.
	sec := func(i int) int64 { return t0.Unix() + int64(max(i-2, 0)) }
	page := stripe.ListParams{Limit: stripe.Int64(2)}

	got := list(t, e, &stripe.PaymentIntentListParams{ListParams: page,
		CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: sec(5)}})
	require.Equal(t, newestFirst(ids, 5, 12), got)

	got = list(t, e, &stripe.PaymentIntentListParams{ListParams: page,
		CreatedRange: &stripe.RangeQueryParams{GreaterThan: sec(5), LesserThan: sec(9)}})
	require.Equal(t, newestFirst(ids, 6, 9), got)

	got = list(t, e, &stripe.PaymentIntentListParams{ListParams: page,
		CreatedRange: &stripe.RangeQueryParams{LesserThanOrEqual: sec(3)}})
	require.Equal(t, newestFirst(ids, 0, 4), got)

	got = list(t, e, &stripe.PaymentIntentListParams{ListParams: page, Created: stripe.Int64(t0.Unix())})
	require.Equal(t, newestFirst(ids, 0, 3), got)

	require.Empty(t, list(t, e, &stripe.PaymentIntentListParams{Created: stripe.Int64(t0.Unix() - 1)}))
	require.Empty(t, list(t, e, &stripe.PaymentIntentListParams{Customer: stripe.String("cus_123")}))
}

func TestListCursorsAndShape(t *testing.T) {
	t.Parallel()
	e, _, ids := listEnv(t, 8)
	auth := "Bearer sk_test_123"

	code, _, body := rawDo(t, e, http.MethodGet, "/v1/payment_intents?limit=3&starting_after="+ids[6], auth, nil, nil)
	require.Equal(t, http.StatusOK, code, body)
	var page struct {
		Object  string `json:"object"`
		Data    []struct{ ID, Object string }
		HasMore bool   `json:"has_more"`
		URL     string `json:"url"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.Equal(t, "list", page.Object)
	require.Equal(t, "/v1/payment_intents", page.URL)
	require.True(t, page.HasMore)
	require.Len(t, page.Data, 3)
	require.Equal(t, []string{ids[5], ids[4], ids[3]}, []string{page.Data[0].ID, page.Data[1].ID, page.Data[2].ID})
	require.Equal(t, "payment_intent", page.Data[0].Object)

	code, _, body = rawDo(t, e, http.MethodGet, "/v1/payment_intents?limit=3&starting_after="+ids[3], auth, nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.False(t, page.HasMore)
	require.Len(t, page.Data, 3)

	// ending_before: the page just newer than the cursor, newest first.
	code, _, body = rawDo(t, e, http.MethodGet, "/v1/payment_intents?limit=2&ending_before="+ids[2], auth, nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, json.Unmarshal([]byte(body), &page))
	require.True(t, page.HasMore)
	require.Equal(t, []string{ids[4], ids[3]}, []string{page.Data[0].ID, page.Data[1].ID})

	// stripe-go pages backwards from ending_before, oldest first.
	got := list(t, e, &stripe.PaymentIntentListParams{ListParams: stripe.ListParams{
		Limit: stripe.Int64(2), EndingBefore: stripe.String(ids[2]),
	}})
	require.Equal(t, ids[3:], got)
	got = list(t, e, &stripe.PaymentIntentListParams{ListParams: stripe.ListParams{
		Limit: stripe.Int64(2), StartingAfter: stripe.String(ids[5]),
	}})
	require.Equal(t, newestFirst(ids, 0, 5), got)

	// Single page through stripe-go.
	it := e.sc.PaymentIntents.List(&stripe.PaymentIntentListParams{ListParams: stripe.ListParams{
		Limit: stripe.Int64(5), Single: true,
	}})
	n := 0
	for it.Next() {
		n++
	}
	require.NoError(t, it.Err())
	require.Equal(t, 5, n)
	require.True(t, it.PaymentIntentList().HasMore)
	require.Equal(t, "/v1/payment_intents", it.PaymentIntentList().URL)
}

func TestListErrors(t *testing.T) {
	t.Parallel()
	e, _, ids := listEnv(t, 2)
	auth := "Bearer sk_test_123"

	for query, param := range map[string]string{
		"limit=0":                 "limit",
		"limit=101":               "limit",
		"limit=abc":               "limit",
		"created=abc":             "created",
		"created[gte]=1.5":        "created[gte]",
		"created[foo]=1":          "created[foo]",
		"status=succeeded":        "status",
		"created=1&created[gt]=0": "created",
		"starting_after=pi_nope":  "starting_after",
		"ending_before=pi_nope":   "ending_before",
		"starting_after=" + ids[0] + "&ending_before=" + ids[1]: "ending_before",
	} {
		code, _, body := rawDo(t, e, http.MethodGet, "/v1/payment_intents?"+query, auth, nil, nil)
		require.Equal(t, http.StatusBadRequest, code, query)
		var env struct{ Error stripe.Error }
		require.NoError(t, json.Unmarshal([]byte(body), &env), query)
		require.Equal(t, stripe.ErrorTypeInvalidRequest, env.Error.Type, query)
		require.Equal(t, param, env.Error.Param, query)
	}

	it := e.sc.PaymentIntents.List(&stripe.PaymentIntentListParams{ListParams: stripe.ListParams{
		StartingAfter: stripe.String("pi_doesnotexist"),
	}})
	require.False(t, it.Next())
	se := stripeErr(t, it.Err())
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeResourceMissing, se.Code)
	require.Equal(t, "No such payment_intent: 'pi_doesnotexist'", se.Msg)

	code, _, body := rawDo(t, e, http.MethodGet, "/v1/payment_intents?created[gt]=0&expand[0]=data.latest_charge", auth, nil, nil)
	require.Equal(t, http.StatusOK, code, body)
	code, _, _ = rawDo(t, e, http.MethodGet, "/v1/payment_intents", "", nil, nil)
	require.Equal(t, http.StatusUnauthorized, code)
	require.EqualValues(t, 13, e.fake.Stats().Lists) // 11 rejected, 2 answered; the 401 is not a list

	code, _, body = rawDo(t, e, http.MethodGet, "/v1/charges", auth, nil, nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Contains(t, body, "create, retrieve, list and search of PaymentIntents, and create, retrieve and list of refunds")
}
