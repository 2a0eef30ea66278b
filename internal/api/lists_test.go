package api_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/testutil"
)

// TestLists covers GET /payments and GET /payments/{id}/refunds: pages,
// cursors and scope.
func TestLists(t *testing.T) {
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

	t.Run("ListsPageNewestFirstAndStayScoped", func(t *testing.T) {
		t.Parallel()
		svc, bundle := setup(t)
		_, otherKey := svc.NewUser(t)
		var ids []string
		for i := range 5 {
			ids = append(ids, paid(t, svc, bundle.apiKey, fmt.Sprintf("p%d", i)).ID)
		}
		paid(t, svc, otherKey, "theirs")
		auth := "Bearer " + bundle.apiKey
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

		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "r1", ids[0], `{"amount": 100}`).Status)
		require.Equal(t, http.StatusCreated, postRefund(t, svc, bundle.apiKey, "r2", ids[0], `{"amount": 200}`).Status)
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
	})
}
