package payments

import (
	"net/http"

	"github.com/stripe/stripe-go/v79"
)

// final reports whether a confirmed PaymentIntent's status is an outcome:
// it succeeded, or it was authorized (capture_method manual), or its
// payment method was declined, or it was canceled. processing and the like
// are not, whatever a first answer says.
func final(pi *stripe.PaymentIntent) bool {
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded, stripe.PaymentIntentStatusRequiresCapture,
		stripe.PaymentIntentStatusRequiresPaymentMethod, stripe.PaymentIntentStatusCanceled:
		return true
	}
	return false
}

// outcomeOf reads the outcome of a PaymentIntent whose status is final.
func outcomeOf(pi *stripe.PaymentIntent) *Charge {
	charge := &Charge{PaymentIntentID: pi.ID, AmountCaptured: pi.AmountReceived}
	switch pi.Status {
	case stripe.PaymentIntentStatusSucceeded:
		charge.Succeeded = true
	case stripe.PaymentIntentStatusRequiresCapture:
		charge.Succeeded, charge.Authorized, charge.AmountCaptured = true, true, 0
	}
	if !charge.Succeeded {
		charge.Declined = true
		charge.Code, charge.Message = "payment_intent_"+string(pi.Status), "the PaymentIntent did not succeed"
		if e := pi.LastPaymentError; e != nil {
			charge.Code, charge.Message = declineCode(e), e.Msg
		}
	}
	return charge
}

// definite reports whether serr is a definite refusal and what it was: a
// card_error, or an invalid_request_error that is not about the key or the
// rate (nothing was charged).
func definite(serr *stripe.Error) (*Charge, bool) {
	switch {
	case serr.Type == stripe.ErrorTypeCard:
		charge := &Charge{Declined: true, Code: declineCode(serr), Message: serr.Msg}
		if serr.PaymentIntent != nil {
			charge.PaymentIntentID = serr.PaymentIntent.ID
		}
		return charge, true
	case serr.Type == stripe.ErrorTypeInvalidRequest && serr.HTTPStatusCode >= 400 && serr.HTTPStatusCode < 500 &&
		serr.HTTPStatusCode != http.StatusUnauthorized && serr.HTTPStatusCode != http.StatusConflict &&
		serr.HTTPStatusCode != http.StatusTooManyRequests:
		return &Charge{Code: string(serr.Code), Message: serr.Msg}, true
	}
	return nil, false
}

func declineCode(e *stripe.Error) string {
	if e.DeclineCode != "" {
		return string(e.DeclineCode)
	}
	return string(e.Code)
}
