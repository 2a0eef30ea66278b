package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/problem"
)

// getPayment serves GET /payments/{id}: the caller's own payment, and 404
// for anyone else's, so ids reveal nothing across users.
func (s *Server) getPayment(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id < 1 {
		writeProblem(w, problem.New(problem.InvalidRequest, "The payment id must be a positive integer."))
		return
	}
	payment, err := s.queries.PaymentGetByIDForUser(r.Context(), s.pool, &dbsqlc.PaymentGetByIDForUserParams{
		ID: id, UserID: userID(r.Context()),
	})
	if err = db.InterpretError(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			writeProblem(w, problem.New(problem.NotFound, "No such payment."))
			return
		}
		writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, payments.ViewOf(payment))
}
