package stripefake

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// listResult is Stripe's list object, of PaymentIntents or refunds.
type listResult[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
	URL     string `json:"url"`
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

// listParams are the parameters of a list request: GET /v1/payment_intents
// or GET /v1/refunds.
type listParams struct {
	created       createdFilter
	limit         int
	startingAfter string
	endingBefore  string
	filters       map[string]string // the endpoint's own filters, those given
}

// parseListParams validates a list query whose endpoint filters by the
// string parameters named in filters (e.g. "customer"). Like Stripe it
// rejects parameters it does not know.
func parseListParams(q url.Values, filters ...string) (listParams, *errorObject) {
	lp := listParams{filters: map[string]string{}}
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
			if slices.Contains(filters, name) {
				lp.filters[name] = v
				continue
			}
			if name == "expand" || strings.HasPrefix(name, "expand[") {
				continue // expansions are accepted (see expands)
			}
			return lp, unknownParamError(name)
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

// cursor resolves the starting_after or ending_before id (if any) to its
// position in creation order with byID; -1 means no cursor. noun names the
// object in Stripe's resource_missing message. The caller holds s.mu.
func (lp listParams) cursor(byID map[string]int, noun string) (int, *errorObject) {
	param, id := "starting_after", lp.startingAfter
	if lp.endingBefore != "" {
		param, id = "ending_before", lp.endingBefore
	}
	if id == "" {
		return -1, nil
	}
	i, ok := byID[id]
	if !ok {
		return -1, noSuch(noun, param, id)
	}
	return i, nil
}

// page picks, among n objects held in creation order, the positions that
// keep accepts: newest first (reverse creation order, so that objects
// created within the same second still page deterministically), on the
// requested side of the cursor position, at most lp.limit. It reports
// whether more remain.
func (lp listParams) page(n, cursor int, keep func(i int) bool) (hits []int, hasMore bool) {
	for i := n - 1; i >= 0; i-- {
		switch {
		case cursor >= 0 && lp.endingBefore == "" && i >= cursor:
			continue
		case cursor >= 0 && lp.endingBefore != "" && i <= cursor:
			continue
		}
		if keep(i) {
			hits = append(hits, i)
		}
	}
	if len(hits) > lp.limit {
		hasMore = true
		if lp.endingBefore != "" {
			// The page closest to the cursor, still newest first.
			hits = hits[len(hits)-lp.limit:]
		} else {
			hits = hits[:lp.limit]
		}
	}
	return hits, hasMore
}

// badList answers an invalid list request.
func (s *Server) badList(w http.ResponseWriter, e *errorObject) {
	s.bump(func(st *Stats) { st.InvalidRequests++ })
	e.RequestLogURL = requestLogURL(w.Header().Get("Request-Id"))
	writeError(w, http.StatusBadRequest, *e)
}

// handleList answers GET /v1/payment_intents: PaymentIntents newest first,
// filtered by created, paged with limit and the starting_after /
// ending_before cursors. Unlike search it is strongly consistent: a
// PaymentIntent is listed as soon as it is created.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request, _ string) {
	s.bump(func(st *Stats) { st.Lists++ })
	q := r.URL.Query()
	lp, perr := parseListParams(q, "customer")
	if perr != nil {
		s.badList(w, perr)
		return
	}

	expandCharge := expands(q, "data.latest_charge")
	res := listResult[*paymentIntentJSON]{Object: "list", Data: []*paymentIntentJSON{}, URL: "/v1/payment_intents"}
	s.mu.Lock()
	cursor, perr := lp.cursor(s.byID, "payment_intent")
	if perr != nil {
		s.mu.Unlock()
		s.badList(w, perr)
		return
	}
	_, customer := lp.filters["customer"]
	hits, more := lp.page(len(s.intents), cursor, func(i int) bool {
		// Emulated PaymentIntents have no customer.
		return !customer && lp.created.matches(s.intents[i].Created.Unix())
	})
	for _, i := range hits {
		res.Data = append(res.Data, s.intents[i].wireExpanded(expandCharge))
	}
	res.HasMore = more
	s.mu.Unlock()
	writeValue(w, http.StatusOK, res)
}
