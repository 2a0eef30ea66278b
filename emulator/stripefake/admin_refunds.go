package stripefake

import (
	"encoding/json"
	"errors"
	"net/http"
)

// AdminRefundStatusRequest is the body of POST /_fake/refunds/{id}/status,
// the JSON form of SetRefundStatus. The answer is the refund's snapshot
// (Refund) as it now is.
type AdminRefundStatusRequest struct {
	// Status is "succeeded" or "failed"; required.
	Status string `json:"status"`
	// FailureReason is recorded with "failed"; empty means
	// expired_or_canceled_card.
	FailureReason string `json:"failure_reason,omitempty"`
}

// decodeAdmin decodes a small JSON admin body strictly into v, or answers
// 400 and returns false.
func decodeAdmin(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, errorObject{Type: typeInvalidRequest, Message: "invalid JSON body: " + err.Error()})
		return false
	}
	return true
}

// adminControlError answers an error of a refund control: 404 for an
// unknown id, 400 otherwise.
func adminControlError(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	if errors.Is(err, ErrNoSuchRefund) || errors.Is(err, ErrNoSuchPaymentIntent) {
		status = http.StatusNotFound
	}
	writeError(w, status, errorObject{Type: typeInvalidRequest, Message: err.Error()})
}

// handleAdminRefunds answers GET /_fake/refunds.
func (s *Server) handleAdminRefunds(w http.ResponseWriter, _ *http.Request) {
	writeValue(w, http.StatusOK, s.Refunds())
}

// handleAdminRefundStatus answers POST /_fake/refunds/{id}/status.
func (s *Server) handleAdminRefundStatus(w http.ResponseWriter, r *http.Request) {
	var req AdminRefundStatusRequest
	if !decodeAdmin(w, r, &req) {
		return
	}
	rf, err := s.SetRefundStatus(r.PathValue("id"), req.Status, req.FailureReason)
	if err != nil {
		adminControlError(w, err)
		return
	}
	writeValue(w, http.StatusOK, rf)
}

// handleAdminRefundOutcome answers POST
// /_fake/payment_intents/{id}/refund_outcome, whose body is a RefundOutcome
// ({} restores the payment method's behaviour). The answer echoes it.
func (s *Server) handleAdminRefundOutcome(w http.ResponseWriter, r *http.Request) {
	var o RefundOutcome
	if !decodeAdmin(w, r, &o) {
		return
	}
	if err := s.SetRefundOutcome(r.PathValue("id"), o); err != nil {
		adminControlError(w, err)
		return
	}
	writeValue(w, http.StatusOK, o)
}
