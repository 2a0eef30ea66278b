package api

import (
	"net/http"

	"github.com/paymentsd/paymentsd/internal/phases/payments"
)

// getPayment serves GET /payments/{id}: the caller's own payment, and 404
// for anyone else's, so ids reveal nothing across users.
func (s *Server) getPayment(w http.ResponseWriter, r *http.Request) {
	if payment := s.pathPayment(w, r); payment != nil {
		writeJSON(w, http.StatusOK, payments.ViewOf(payment))
	}
}
