package api

import (
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/phases/refunds"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// pathPayment reads the caller's payment the path names (by its public
// id, or by the number of one made before public ids): a malformed id is a
// 400, another user's payment a 404, like a missing one. On failure it has
// answered and returns nil.
func (s *Server) pathPayment(w http.ResponseWriter, r *http.Request) *dbsqlc.Payment {
	ref, err := payments.ParseRef(chi.URLParam(r, "id"))
	if err != nil {
		writeProblem(w, problem.New(problem.InvalidRequest, "The payment id must be a payment's id (pay_…)."))
		return nil
	}
	user := userID(r.Context())
	var payment *dbsqlc.Payment
	public, err := ref.Resolve(r.Context(), s.pool, user)
	if err == nil {
		payment, err = s.queries.PaymentGetByPublicIDForUser(r.Context(), s.pool, &dbsqlc.PaymentGetByPublicIDForUserParams{
			UserID: user, PublicID: public,
		})
	}
	if !s.found(w, r, err, "No such payment.") {
		return nil
	}
	return payment
}

// getRefund serves GET /refunds/{id}: the caller's own refund, 404 otherwise.
func (s *Server) getRefund(w http.ResponseWriter, r *http.Request) {
	raw, user := chi.URLParam(r, "id"), userID(r.Context())
	public, err := ids.Parse(ids.Refund, raw)
	if err != nil {
		n, ok := ids.ParseNumber(raw)
		if !ok {
			writeProblem(w, problem.New(problem.InvalidRequest, "The refund id must be a refund's id (re_…)."))
			return
		}
		// A refund made before public ids, by the number its stored
		// answers show.
		public, err = s.queries.RefundPublicIDByLegacyID(r.Context(), s.pool, &dbsqlc.RefundPublicIDByLegacyIDParams{UserID: user, LegacyID: &n})
		if !s.found(w, r, err, "No such refund.") {
			return
		}
	}
	refund, err := s.queries.RefundGetByPublicIDForUser(r.Context(), s.pool, &dbsqlc.RefundGetByPublicIDForUserParams{
		UserID: user, PublicID: public,
	})
	if !s.found(w, r, err, "No such refund.") {
		return
	}
	writeJSON(w, http.StatusOK, refunds.ViewOf(refund))
}

// listPayments serves GET /payments: the caller's payments, newest first.
func (s *Server) listPayments(w http.ResponseWriter, r *http.Request) {
	c, ok := parseCursor(w, r.URL.Query(), ids.Payment)
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
			UserID: user, StartingAfter: c.after(), MaxRows: c.limit + 1})
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
	payment := s.pathPayment(w, r)
	if payment == nil {
		return
	}
	c, ok := parseCursor(w, r.URL.Query(), ids.Refund)
	if !ok {
		return
	}
	user := userID(r.Context())
	var (
		rows []*dbsqlc.Refund
		err  error
	)
	if c.endingBefore != nil {
		rows, err = s.queries.RefundListForPaymentBefore(r.Context(), s.pool, &dbsqlc.RefundListForPaymentBeforeParams{
			PaymentID: payment.ID, UserID: user, EndingBefore: *c.endingBefore, MaxRows: c.limit + 1})
	} else {
		rows, err = s.queries.RefundListForPayment(r.Context(), s.pool, &dbsqlc.RefundListForPaymentParams{
			PaymentID: payment.ID, UserID: user, StartingAfter: c.after(), MaxRows: c.limit + 1})
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(c, rows, refunds.ViewOf, payments.Location(payments.ID(payment))+"/refunds"))
}

// found answers a lookup's failure: 404 for a missing row (another user's
// is the same), the classified error otherwise. It returns true when the
// row was found.
func (s *Server) found(w http.ResponseWriter, r *http.Request, err error, notFound string) bool {
	switch {
	case errors.Is(err, db.ErrNotFound):
		writeProblem(w, problem.New(problem.NotFound, notFound))
		return false
	case err != nil:
		writeError(w, r, err)
		return false
	}
	return true
}
