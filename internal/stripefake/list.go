package stripefake

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// listResult is Stripe's list object.
type listResult struct {
	Object  string               `json:"object"`
	Data    []*paymentIntentJSON `json:"data"`
	HasMore bool                 `json:"has_more"`
	URL     string               `json:"url"`
}

// createdFilter is the created parameter of a list: an exact Unix second
// (created=N) or bounds (created[gt]=N, ...); nil fields do not filter.
type createdFilter struct {
	eq, gt, gte, lt, lte *int64
}

// matches reports whether a creation time in Unix seconds passes f.
func (f createdFilter) matches(t int64) bool {
	return (f.eq == nil || t == *f.eq) &&
		(f.gt == nil || t > *f.gt) && (f.gte == nil || t >= *f.gte) &&
		(f.lt == nil || t < *f.lt) && (f.lte == nil || t <= *f.lte)
}

// listParams are the parameters of GET /v1/payment_intents.
type listParams struct {
	created       createdFilter
	limit         int
	startingAfter string
	endingBefore  string
	customer      *string
}

// parseListParams validates a list query. Like Stripe it rejects parameters
// it does not know.
func parseListParams(q url.Values) (listParams, *errorObject) {
	lp := listParams{}
	var perr *errorObject
	if lp.limit, perr = limitParam(q); perr != nil {
		return lp, perr
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		v, _ := single(q, name)
		var dst **int64
		switch name {
		case "limit":
			continue
		case "starting_after":
			lp.startingAfter = v
			continue
		case "ending_before":
			lp.endingBefore = v
			continue
		case "customer":
			lp.customer = &v
			continue
		case "created":
			dst = &lp.created.eq
		case "created[gt]":
			dst = &lp.created.gt
		case "created[gte]":
			dst = &lp.created.gte
		case "created[lt]":
			dst = &lp.created.lt
		case "created[lte]":
			dst = &lp.created.lte
		default:
			if name == "expand" || strings.HasPrefix(name, "expand[") {
				continue // expansions are accepted and ignored
			}
			return lp, &errorObject{
				Type:    typeInvalidRequest,
				Code:    "parameter_unknown",
				Param:   name,
				DocURL:  "https://stripe.com/docs/error-codes/parameter-unknown",
				Message: "Received unknown parameter: " + name,
			}
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return lp, invalidParam(name, "parameter_invalid_integer", "Invalid integer: "+v)
		}
		*dst = &n
	}
	c := lp.created
	if c.eq != nil && (c.gt != nil || c.gte != nil || c.lt != nil || c.lte != nil) {
		return lp, invalidParam("created", "",
			"Invalid created: pass either an integer Unix timestamp or a hash of gt, gte, lt and lte, not both.")
	}
	if lp.startingAfter != "" && lp.endingBefore != "" {
		return lp, invalidParam("ending_before", "",
			"You may only specify one of these parameters: ending_before, starting_after.")
	}
	return lp, nil
}

// handleList answers GET /v1/payment_intents: PaymentIntents newest first
// (reverse creation order, so that those created within the same second
// still page deterministically), filtered by created, paged with limit and
// the starting_after / ending_before cursors. Unlike search it is strongly
// consistent: a PaymentIntent is listed as soon as it is created.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request, _ string) {
	s.bump(func(st *Stats) { st.Lists++ })
	bad := func(status int, e *errorObject) {
		s.bump(func(st *Stats) { st.InvalidRequests++ })
		e.RequestLogURL = requestLogURL(w.Header().Get("Request-Id"))
		writeError(w, status, *e)
	}
	lp, perr := parseListParams(r.URL.Query())
	if perr != nil {
		bad(http.StatusBadRequest, perr)
		return
	}

	expandCharge := expands(r.URL.Query(), "data.latest_charge")
	res := listResult{Object: "list", Data: []*paymentIntentJSON{}, URL: "/v1/payment_intents"}
	s.mu.Lock()
	// Cursors are positions in creation order; -1 means none.
	cursor, cursorParam := -1, ""
	for _, c := range []struct{ param, id string }{{"starting_after", lp.startingAfter}, {"ending_before", lp.endingBefore}} {
		if c.id == "" {
			continue
		}
		idx, ok := s.byID[c.id]
		if !ok {
			s.mu.Unlock()
			bad(http.StatusBadRequest, &errorObject{
				Type:    typeInvalidRequest,
				Code:    "resource_missing",
				Param:   c.param,
				DocURL:  "https://stripe.com/docs/error-codes/resource-missing",
				Message: "No such payment_intent: '" + c.id + "'",
			})
			return
		}
		cursor, cursorParam = idx, c.param
	}
	// Matching positions, newest first, on the requested side of the cursor.
	var hits []int
	for i := len(s.intents) - 1; i >= 0; i-- {
		switch {
		case cursorParam == "starting_after" && i >= cursor:
			continue
		case cursorParam == "ending_before" && i <= cursor:
			continue
		}
		pi := s.intents[i].PaymentIntent
		if lp.customer != nil || !lp.created.matches(pi.Created.Unix()) {
			continue // emulated PaymentIntents have no customer
		}
		hits = append(hits, i)
	}
	if len(hits) > lp.limit {
		res.HasMore = true
		if cursorParam == "ending_before" {
			// The page closest to the cursor, still newest first.
			hits = hits[len(hits)-lp.limit:]
		} else {
			hits = hits[:lp.limit]
		}
	}
	for _, i := range hits {
		res.Data = append(res.Data, s.intents[i].wireExpanded(expandCharge))
	}
	s.mu.Unlock()
	writeValue(w, http.StatusOK, res)
}
