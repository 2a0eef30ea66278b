package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/phases/refunds"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// pathID reads the path's positive integer id of what; on failure it has
// answered and returns false.
func pathID(w http.ResponseWriter, r *http.Request, what string) (int64, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id < 1 {
		writeProblem(w, problem.New(problem.InvalidRequest, "The "+what+" id must be a positive integer."))
		return 0, false
	}
	return id, true
}

// getRefund serves GET /refunds/{id}: the caller's own refund, 404 otherwise.
func (s *Server) getRefund(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "refund")
	if !ok {
		return
	}
	refund, err := s.queries.RefundGetByIDForUser(r.Context(), s.pool, &dbsqlc.RefundGetByIDForUserParams{
		ID: id, UserID: userID(r.Context()),
	})
	if !s.found(w, r, err, "No such refund.") {
		return
	}
	writeJSON(w, http.StatusOK, refunds.ViewOf(refund))
}

// listPayments serves GET /payments: the caller's payments, newest first.
func (s *Server) listPayments(w http.ResponseWriter, r *http.Request) {
	c, ok := parseCursor(w, r.URL.Query())
	if !ok {
		return
	}
	user := userID(r.Context())
	var (
		rows []*dbsqlc.Payment
		err  error
	)
	if c.endingBefore != nil {
		rows, err = s.queries.PaymentListForUserBefore(r.Context(), s.pool, &dbsqlc.PaymentListForUserBeforeParams{
			UserID: user, EndingBefore: *c.endingBefore, MaxRows: c.limit + 1})
	} else {
		rows, err = s.queries.PaymentListForUser(r.Context(), s.pool, &dbsqlc.PaymentListForUserParams{
			UserID: user, StartingAfter: c.startingAfter, MaxRows: c.limit + 1})
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(c, rows, payments.ViewOf, payments.Path))
}

// listRefunds serves GET /payments/{id}/refunds: a payment's refunds,
// newest first; 404 for a payment that is not the caller's.
func (s *Server) listRefunds(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "payment")
	if !ok {
		return
	}
	c, ok := parseCursor(w, r.URL.Query())
	if !ok {
		return
	}
	user := userID(r.Context())
	_, err := s.queries.PaymentGetByIDForUser(r.Context(), s.pool, &dbsqlc.PaymentGetByIDForUserParams{ID: id, UserID: user})
	if !s.found(w, r, err, "No such payment.") {
		return
	}
	var rows []*dbsqlc.Refund
	if c.endingBefore != nil {
		rows, err = s.queries.RefundListForPaymentBefore(r.Context(), s.pool, &dbsqlc.RefundListForPaymentBeforeParams{
			PaymentID: id, UserID: user, EndingBefore: *c.endingBefore, MaxRows: c.limit + 1})
	} else {
		rows, err = s.queries.RefundListForPayment(r.Context(), s.pool, &dbsqlc.RefundListForPaymentParams{
			PaymentID: id, UserID: user, StartingAfter: c.startingAfter, MaxRows: c.limit + 1})
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(c, rows, refunds.ViewOf, payments.Location(id)+"/refunds"))
}

// found answers a lookup's failure: 404 for a missing row (another user's
// is the same), the classified error otherwise. It returns true when the
// row was found.
func (s *Server) found(w http.ResponseWriter, r *http.Request, err error, notFound string) bool {
	switch err = db.InterpretError(err); {
	case errors.Is(err, db.ErrNotFound):
		writeProblem(w, problem.New(problem.NotFound, notFound))
		return false
	case err != nil:
		writeError(w, r, err)
		return false
	}
	return true
}
