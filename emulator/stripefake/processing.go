package stripefake

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
)

// ErrNotProcessing: SetPaymentIntentStatus was given a PaymentIntent that is
// not processing (only a processing one is still to settle).
var ErrNotProcessing = errors.New("stripefake: the PaymentIntent is not processing")

// declineMessages are the messages Stripe gives with its decline codes.
var declineMessages = map[string]string{
	"generic_decline":    "Your card was declined.",
	"insufficient_funds": "Your card has insufficient funds.",
	"lost_card":          "Your card was declined.",
	"stolen_card":        "Your card was declined.",
	"expired_card":       "Your card has expired.",
	"incorrect_cvc":      "Your card's security code is incorrect.",
	"processing_error":   "An error occurred while processing your card. Try again in a little bit.",
}

// declineMessage is the message of a decline code.
func declineMessage(code string) string {
	if m, ok := declineMessages[code]; ok {
		return m
	}
	return "Your card was declined."
}

// SetPaymentIntentStatus moves a processing PaymentIntent (one confirmed
// with pm_card_processing) on, as the payment network eventually does:
// to StatusSucceeded (amount received, its charge succeeded; refundable
// and disputable from then on) or to StatusRequiresPaymentMethod, a failed
// payment whose last_payment_error carries declineCode (empty:
// generic_decline; one of those declineMessages knows). declineCode is
// only allowed with StatusRequiresPaymentMethod. With webhooks it sends
// payment_intent.succeeded or payment_intent.payment_failed. Retrieve,
// list and search show the new status at once (search after its lag). A
// PaymentIntent with capture_method=manual that goes through is only
// authorized: StatusSucceeded makes it StatusRequiresCapture (amount
// capturable, event payment_intent.amount_capturable_updated).
//
// It returns the PaymentIntent as it now is, ErrNoSuchPaymentIntent for an
// unknown id, or ErrNotProcessing for one that is not processing (moving a
// PaymentIntent to the status it has is also ErrNotProcessing: only a
// processing one ever settles).
func (s *Server) SetPaymentIntentStatus(paymentIntentID, status, declineCode string) (PaymentIntent, error) {
	switch {
	case status != StatusSucceeded && status != StatusRequiresPaymentMethod:
		return PaymentIntent{}, fmt.Errorf("stripefake: a processing PaymentIntent can only become %s or %s, not %q",
			StatusSucceeded, StatusRequiresPaymentMethod, status)
	case declineCode != "" && status != StatusRequiresPaymentMethod:
		return PaymentIntent{}, fmt.Errorf("stripefake: a decline_code needs the status %s", StatusRequiresPaymentMethod)
	case declineCode != "" && !slices.Contains(knownDeclineCodes(), declineCode):
		return PaymentIntent{}, fmt.Errorf("stripefake: unknown decline_code %q (want one of %v)", declineCode, knownDeclineCodes())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, ok := s.byID[paymentIntentID]
	if !ok {
		return PaymentIntent{}, fmt.Errorf("%w: %q", ErrNoSuchPaymentIntent, paymentIntentID)
	}
	pi := &s.intents[idx].PaymentIntent
	if pi.Status != StatusProcessing {
		return pi.snapshot(), fmt.Errorf("%w: %s is %s", ErrNotProcessing, pi.ID, pi.Status)
	}
	typ := "payment_intent.succeeded"
	switch {
	case status == StatusSucceeded && pi.CaptureMethod == captureManual:
		// Authorized only: the funds wait for a capture.
		status = StatusRequiresCapture
		pi.AmountCapturable = pi.Amount
		typ = "payment_intent.amount_capturable_updated"
	case status == StatusSucceeded:
		pi.AmountReceived = pi.Amount
	default:
		if declineCode == "" {
			declineCode = "generic_decline"
		}
		pi.DeclineCode = declineCode
		s.stats.Declines++
		typ = "payment_intent.payment_failed"
	}
	pi.Status = status
	if status == StatusRequiresCapture {
		s.holdLocked(pi.ID)
	}
	s.emitLocked(typ, pi.ID, pi.wire(), eventRequest{})
	return pi.snapshot(), nil
}

// knownDeclineCodes lists the decline codes SetPaymentIntentStatus takes.
func knownDeclineCodes() []string {
	codes := make([]string, 0, len(declineMessages))
	for c := range declineMessages {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	return codes
}

// AdminPaymentIntentStatusRequest is the body of POST
// /_fake/payment_intents/{id}/status, the JSON form of
// SetPaymentIntentStatus. The answer is the PaymentIntent's snapshot as it
// now is.
type AdminPaymentIntentStatusRequest struct {
	// Status is "succeeded" or "requires_payment_method" (failed); required.
	Status string `json:"status"`
	// DeclineCode is recorded with "requires_payment_method"; empty means
	// generic_decline.
	DeclineCode string `json:"decline_code,omitempty"`
}

// handleAdminPaymentIntentStatus answers POST
// /_fake/payment_intents/{id}/status: 404 for an unknown PaymentIntent, 400
// for one that is not processing or a bad body.
func (s *Server) handleAdminPaymentIntentStatus(w http.ResponseWriter, r *http.Request) {
	var req AdminPaymentIntentStatusRequest
	if !decodeAdmin(w, r, &req) {
		return
	}
	pi, err := s.SetPaymentIntentStatus(r.PathValue("id"), req.Status, req.DeclineCode)
	if err != nil {
		adminControlError(w, err)
		return
	}
	writeValue(w, http.StatusOK, pi)
}
