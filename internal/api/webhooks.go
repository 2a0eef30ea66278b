package api

import (
	"errors"
	"net/http"

	"github.com/paymentsd/paymentsd/internal/problem"
	"github.com/paymentsd/paymentsd/internal/webhooks"
)

// stripeWebhook serves POST /webhooks/stripe.
func (s *Server) stripeWebhook(w http.ResponseWriter, r *http.Request) {
	s.cfg.Webhooks.Serve(w, r, func(err error) {
		if errors.Is(err, webhooks.ErrInvalidSignature) {
			writeProblem(w, problem.New(problem.InvalidSignature,
				"The Stripe-Signature header does not verify this body with the endpoint's secret within 300 seconds."))
			return
		}
		writeError(w, r, err)
	})
}
