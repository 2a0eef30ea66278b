package stripefake

import "net/http"

// handleRefundList answers GET /v1/refunds: refunds newest first, filtered
// by payment_intent, charge and created, paged with limit and the
// starting_after / ending_before cursors, like the PaymentIntent list.
// Strongly consistent: a refund is listed, with its current status, as soon
// as it is created. A payment_intent or charge that does not exist matches
// nothing.
func (s *Server) handleRefundList(w http.ResponseWriter, r *http.Request, _ string) {
	s.bump(func(st *Stats) { st.RefundLists++ })
	lp, perr := parseListParams(r.URL.Query(), "payment_intent", "charge")
	if perr != nil {
		s.badList(w, perr)
		return
	}

	res := listResult[*refundJSON]{Object: "list", Data: []*refundJSON{}, URL: "/v1/refunds"}
	s.mu.Lock()
	cursor, perr := lp.cursor(s.refundByID, "refund")
	if perr != nil {
		s.mu.Unlock()
		s.badList(w, perr)
		return
	}
	pi, byPI := lp.filters["payment_intent"]
	ch, byCharge := lp.filters["charge"]
	hits, more := lp.page(len(s.refunds), cursor, func(i int) bool {
		rf := s.refunds[i]
		return (!byPI || rf.PaymentIntent == pi) && (!byCharge || rf.Charge == ch) &&
			lp.created.matches(rf.Created.Unix())
	})
	for _, i := range hits {
		res.Data = append(res.Data, s.refunds[i].wire())
	}
	res.HasMore = more
	s.mu.Unlock()
	writeValue(w, http.StatusOK, res)
}
