package api

import (
	"net/http"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
)

// getPayment serves GET /payments/{id}: the caller's own payment, and 404
// for anyone else's, so ids reveal nothing across users.
func (s *Server) getPayment(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "payment")
	if !ok {
		return
	}
	payment, err := s.queries.PaymentGetByIDForUser(r.Context(), s.pool, &dbsqlc.PaymentGetByIDForUserParams{
		ID: id, UserID: userID(r.Context()),
	})
	if !s.found(w, r, err, "No such payment.") {
		return
	}
	writeJSON(w, http.StatusOK, payments.ViewOf(payment))
}
