package stripefake_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v79"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// search collects all results of query through stripe-go's search iterator.
func search(t *testing.T, e *env, query string) []*stripe.PaymentIntent {
	t.Helper()
	it := e.sc.PaymentIntents.Search(&stripe.PaymentIntentSearchParams{
		SearchParams: stripe.SearchParams{Query: query, Limit: stripe.Int64(2)},
	})
	var out []*stripe.PaymentIntent
	for it.Next() {
		out = append(out, it.PaymentIntent())
	}
	require.NoError(t, it.Err())
	return out
}

func TestSearchByMetadata(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})

	ids := map[string]string{}
	for i := range 5 {
		pid := fmt.Sprint(100 + i)
		pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", pid, ""))
		require.NoError(t, err)
		ids[pid] = pi.ID
	}
	p := piParams("pm_card_chargeDeclined", "200", "")
	p.AddMetadata("tenant", "it's")
	_, err := e.sc.PaymentIntents.New(p)
	require.Error(t, err)

	got := search(t, e, "metadata['payment_id']:'102'")
	require.Len(t, got, 1)
	require.Equal(t, ids["102"], got[0].ID)
	require.Equal(t, "102", got[0].Metadata["payment_id"])

	got = search(t, e, `metadata["payment_id"]:"103"`)
	require.Len(t, got, 1)
	require.Equal(t, ids["103"], got[0].ID)

	got = search(t, e, `metadata['payment_id']:'200' AND metadata['tenant']:'it\'s'`)
	require.Len(t, got, 1)
	require.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, got[0].Status)
	require.Empty(t, search(t, e, `metadata['payment_id']:'200' AND metadata['tenant']:'other'`))
	require.Empty(t, search(t, e, "metadata['payment_id']:'999'"))

	// Paging (limit 2 per page) walks all six, newest first.
	all := search(t, e, "currency:'usd' AND amount:1234")
	require.Len(t, all, 6)
	require.Equal(t, ids["100"], all[5].ID)
	require.Len(t, search(t, e, "status:'succeeded'"), 5)
	require.EqualValues(t, 11, e.fake.Stats().Searches)
}

func TestSearchResultShapeAndErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	auth := "Bearer sk_test_123"

	code, _, body := rawDo(t, e, http.MethodGet,
		"/v1/payment_intents/search?query="+url.QueryEscape("metadata['x']:'y'"), auth, nil, nil)
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"object":"search_result","data":[],"has_more":false,"next_page":null,"url":"/v1/payment_intents/search"}`, body)

	for _, q := range []string{
		"", "metadata['x']", "metadata[x]:'y'", "metadata['x']:'y' OR metadata['z']:'w' AND status:'succeeded'",
		"metadata['x']:'y' and status:'succeeded'", "customer:'cus_1'", "metadata['x']:'y",
		"amount:abc", "metadata['x']~'y'", "metadata['x']:'y'AND status:'x'",
	} {
		code, _, body := rawDo(t, e, http.MethodGet, "/v1/payment_intents/search?query="+url.QueryEscape(q), auth, nil, nil)
		require.Equal(t, http.StatusBadRequest, code, q)
		require.Contains(t, body, `"type":"invalid_request_error"`, q)
	}
	code, _, _ = rawDo(t, e, http.MethodGet, "/v1/payment_intents/search?query=status:'x'&limit=1000", auth, nil, nil)
	require.Equal(t, http.StatusBadRequest, code)
	code, _, _ = rawDo(t, e, http.MethodGet, "/v1/payment_intents/search?query=status:'x'&page=garbage", auth, nil, nil)
	require.Equal(t, http.StatusBadRequest, code)

	it := e.sc.PaymentIntents.Search(&stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: "bogus"}})
	require.False(t, it.Next())
	se := stripeErr(t, it.Err())
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, "query", se.Param)
}

// Search lags writes by Options.SearchLag; retrieve and list do not.
func TestSearchLag(t *testing.T) {
	t.Parallel()
	clock := newClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	const lag = 2 * time.Second
	e := newEnv(t, stripefake.Options{Now: clock.Now, SearchLag: lag})

	pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "lag", ""))
	require.NoError(t, err)
	const q = "metadata['payment_id']:'lag'"
	require.Empty(t, search(t, e, q))
	require.EqualValues(t, 1, e.fake.Stats().SearchesLagged)

	got, err := e.sc.PaymentIntents.Get(pi.ID, nil)
	require.NoError(t, err)
	require.Equal(t, pi.ID, got.ID)
	it := e.sc.PaymentIntents.List(&stripe.PaymentIntentListParams{})
	require.True(t, it.Next())
	require.Equal(t, pi.ID, it.PaymentIntent().ID)
	require.NoError(t, it.Err())

	clock.Add(lag - time.Millisecond)
	require.Empty(t, search(t, e, q))
	clock.Add(time.Millisecond)
	found := search(t, e, q)
	require.Len(t, found, 1)
	require.Equal(t, pi.ID, found[0].ID)
	require.EqualValues(t, 2, e.fake.Stats().SearchesLagged)

	// Chaos.SearchLag overrides the option while set.
	e.fake.SetChaos(stripefake.Chaos{SearchLag: time.Minute})
	require.Empty(t, search(t, e, q))
	e.fake.SetChaos(stripefake.Chaos{})
	require.Len(t, search(t, e, q), 1)
}

// A search page continues after the last result shown: a PaymentIntent that
// becomes visible between two pages neither shifts nor repeats results.
func TestSearchPagesContinueAfterLagCatchesUp(t *testing.T) {
	t.Parallel()
	clock := newClock(time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC))
	e := newEnv(t, stripefake.Options{Now: clock.Now, SearchLag: time.Second})

	var ids []string
	for i := range 3 {
		pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", fmt.Sprint(i), ""))
		require.NoError(t, err)
		ids = append(ids, pi.ID)
	}
	clock.Add(time.Second)
	late, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", "late", ""))
	require.NoError(t, err)

	it := e.sc.PaymentIntents.Search(&stripe.PaymentIntentSearchParams{
		SearchParams: stripe.SearchParams{Query: "currency:'usd'", Limit: stripe.Int64(2)},
	})
	var got []string
	for len(got) < 2 && it.Next() {
		got = append(got, it.PaymentIntent().ID)
	}
	clock.Add(time.Second) // "late" becomes visible before page 2
	for it.Next() {
		got = append(got, it.PaymentIntent().ID)
	}
	require.NoError(t, it.Err())
	require.Equal(t, []string{ids[2], ids[1], ids[0]}, got)
	require.Len(t, search(t, e, "currency:'usd'"), 4)
	require.Equal(t, late.ID, search(t, e, "currency:'usd'")[0].ID)
}

// TestSearchByAnyOf: clauses joined by OR match a PaymentIntent that
// satisfies any of them; AND and OR are never mixed, and a query combines
// at most ten clauses.
func TestSearchByAnyOf(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stripefake.Options{})
	ids := map[string]string{}
	for i := range 3 {
		pid := fmt.Sprint(300 + i)
		pi, err := e.sc.PaymentIntents.New(piParams("pm_card_visa", pid, ""))
		require.NoError(t, err)
		ids[pid] = pi.ID
	}
	got := search(t, e, "metadata['payment_id']:'300' OR metadata['payment_id']:'302' OR metadata['payment_id']:'999'")
	require.Len(t, got, 2)
	require.ElementsMatch(t, []string{ids["300"], ids["302"]}, []string{got[0].ID, got[1].ID})

	for _, bad := range []string{
		"metadata['payment_id']:'300' OR metadata['payment_id']:'301' AND status:'succeeded'",
		"amount:1 OR amount:2 OR amount:3 OR amount:4 OR amount:5 OR amount:6 OR amount:7 OR amount:8 OR amount:9 OR amount:10 OR amount:11",
	} {
		it := e.sc.PaymentIntents.Search(&stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: bad}})
		require.False(t, it.Next())
		require.Equal(t, http.StatusBadRequest, stripeErr(t, it.Err()).HTTPStatusCode, bad)
	}
}
