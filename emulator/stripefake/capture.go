package stripefake

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Capture and cancel. POST /v1/payment_intents/{id}/capture takes the
// funds of an authorization (a PaymentIntent requires_capture): all of
// amount_capturable, or amount_to_capture of it, the rest released.
// POST /v1/payment_intents/{id}/cancel ends a PaymentIntent that has not
// taken any funds, an authorization included (its hold released). Both are
// writes like creates (see serveWrite): idempotent, saved once they
// execute, and they take faults (Op OpCapturePaymentIntent and
// OpCancelPaymentIntent). A PaymentIntent whose status does not allow the
// operation is a 400 invalid_request_error with code
// payment_intent_unexpected_state and the PaymentIntent in the error, as
// Stripe answers; an unknown one is a 404 resource_missing. Both refusals
// are executed answers: saved under the idempotency key.

// captureParamNames are the parameters Stripe's POST
// /v1/payment_intents/{id}/capture knows at API version 2024-06-20; any
// other is refused (unknownParam).
var captureParamNames = []string{
	"amount_to_capture", "application_fee_amount", "expand", "final_capture", "metadata",
	"statement_descriptor", "statement_descriptor_suffix", "transfer_data",
}

// cancelParamNames are those of POST /v1/payment_intents/{id}/cancel.
var cancelParamNames = []string{"cancellation_reason", "expand"}

// cancellationReasons are the reasons a client may give to cancel; Stripe
// itself gives others (automatic, failed_invoice, void_invoice).
var cancellationReasons = []string{"abandoned", "duplicate", "fraudulent", "requested_by_customer"}

// cancelableStatuses are the statuses a PaymentIntent can be canceled in,
// as Stripe's refusal lists them. Stripe also cancels a processing one "in
// rare cases" (some payment methods); the emulator's processing
// PaymentIntents, like a bank debit under way, cannot be.
var cancelableStatuses = []string{
	StatusRequiresPaymentMethod, StatusRequiresCapture, StatusRequiresConfirmation, "requires_action",
}

// captureParams are the parameters of a capture the emulator understands;
// application_fee_amount, statement_descriptor(_suffix), transfer_data and
// final_capture (multicapture is not modelled: every capture is final) are
// accepted and ignored.
type captureParams struct {
	amount       int64 // 0: all of amount_capturable
	metadata     metadataUpdate
	expandCharge bool
}

// parseCaptureParams validates the form of a capture. A non-nil error is a
// validation failure detected before execution (never saved for
// idempotency); whether the amount fits what is capturable is decided by
// the execution.
func parseCaptureParams(form url.Values) (captureParams, *errorObject) {
	var p captureParams
	if perr := unknownParam(form, captureParamNames); perr != nil {
		return p, perr
	}
	if raw, _ := single(form, "amount_to_capture"); raw != "" {
		amount, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return p, invalidParam("amount_to_capture", "parameter_invalid_integer", "Invalid integer: "+raw)
		}
		if amount < 1 {
			return p, invalidParam("amount_to_capture", "parameter_invalid_integer", "Invalid positive integer")
		}
		p.amount = amount
	}
	if _, ok := boolParam(form, "final_capture"); !ok {
		return p, invalidParam("final_capture", "parameter_invalid_boolean", "Invalid boolean: "+form.Get("final_capture"))
	}
	var perr *errorObject
	if p.metadata, perr = parseMetadataUpdate(form); perr != nil {
		return p, perr
	}
	p.expandCharge = expands(form, "latest_charge")
	return p, nil
}

// cancelParams are the parameters of a cancel.
type cancelParams struct {
	reason       string // empty: none given
	expandCharge bool
}

// parseCancelParams validates the form of a cancel.
func parseCancelParams(form url.Values) (cancelParams, *errorObject) {
	var p cancelParams
	if perr := unknownParam(form, cancelParamNames); perr != nil {
		return p, perr
	}
	p.reason, _ = single(form, "cancellation_reason")
	if p.reason != "" && !slices.Contains(cancellationReasons, p.reason) {
		return p, invalidParam("cancellation_reason", "",
			"Invalid cancellation_reason: must be one of abandoned, duplicate, fraudulent, or requested_by_customer")
	}
	p.expandCharge = expands(form, "latest_charge")
	return p, nil
}

// handleCapture answers POST /v1/payment_intents/{id}/capture.
func (s *Server) handleCapture(w http.ResponseWriter, r *http.Request, apiKey string) {
	id := r.PathValue("id")
	s.serveWrite(w, r, apiKey, writeEndpoint{
		op:    OpCapturePaymentIntent,
		path:  r.URL.Path,
		count: func(st *Stats) { st.CaptureRequests++ },
		parse: func(form url.Values) (executor, *errorObject) {
			p, perr := parseCaptureParams(form)
			if perr != nil {
				return nil, perr
			}
			return func(reqID, key string) outcome { return s.capture(id, p, reqID, key) }, nil
		},
	})
}

// handleCancel answers POST /v1/payment_intents/{id}/cancel.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, apiKey string) {
	id := r.PathValue("id")
	s.serveWrite(w, r, apiKey, writeEndpoint{
		op:    OpCancelPaymentIntent,
		path:  r.URL.Path,
		count: func(st *Stats) { st.CancelRequests++ },
		parse: func(form url.Values) (executor, *errorObject) {
			p, perr := parseCancelParams(form)
			if perr != nil {
				return nil, perr
			}
			return func(reqID, key string) outcome { return s.cancel(id, p, reqID, key) }, nil
		},
	})
}

// capture executes a validated capture of the PaymentIntent id: under one
// lock, so that a capture, a cancel and the end of the authorization window
// never both take effect. The PaymentIntent succeeds with amount_received
// the amount captured and nothing capturable; what was not captured is
// released (its charge shows it refunded). It sends
// payment_intent.succeeded.
func (s *Server) capture(id string, p captureParams, reqID, idempotencyKey string) outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireDueLocked() // a latency may have outlasted the window
	idx, ok := s.byID[id]
	if !ok {
		s.stats.InvalidRequests++
		return outcome{http.StatusNotFound, errorBody(noSuchIntent(id, reqID))}
	}
	rec := &s.intents[idx]
	pi := &rec.PaymentIntent
	if pi.Status != StatusRequiresCapture {
		s.stats.InvalidRequests++
		return outcome{http.StatusBadRequest, unexpectedState(*pi, reqID,
			"This PaymentIntent could not be captured because it has a status of "+pi.Status+
				". Only a PaymentIntent with one of the following statuses may be captured: requires_capture.")}
	}
	amount := pi.AmountCapturable
	if p.amount > 0 {
		if p.amount > pi.AmountCapturable {
			s.stats.InvalidRequests++
			return outcome{http.StatusBadRequest, errorBody(errorObject{
				Type:   typeInvalidRequest,
				Code:   "amount_too_large",
				Param:  "amount_to_capture",
				DocURL: "https://stripe.com/docs/error-codes/amount-too-large",
				Message: "The payment could not be captured because the requested capture amount is greater than " +
					"the authorized amount. If you are trying to collect a tip or over-capture, your account might " +
					"not be configured for those features. Contact us via https://support.stripe.com/contact/",
				PaymentIntent: pi.wire(),
				RequestLogURL: requestLogURL(reqID),
			})}
		}
		amount = p.amount
	}
	pi.Status = StatusSucceeded
	pi.AmountReceived = amount
	pi.AmountCapturable = 0
	pi.Metadata = p.metadata.apply(pi.Metadata)
	s.releaseLocked(pi.ID)
	s.stats.Captures++
	s.emitLocked("payment_intent.succeeded", pi.ID, pi.wire(), requestOf(reqID, idempotencyKey))
	return outcome{http.StatusOK, marshalWire(rec.wireExpanded(p.expandCharge))}
}

// cancel executes a validated cancel of the PaymentIntent id. The
// PaymentIntent is canceled now with the reason given (if any); an
// authorization's hold is released (its charge shows it refunded). It sends
// payment_intent.canceled.
func (s *Server) cancel(id string, p cancelParams, reqID, idempotencyKey string) outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireDueLocked()
	idx, ok := s.byID[id]
	if !ok {
		s.stats.InvalidRequests++
		return outcome{http.StatusNotFound, errorBody(noSuchIntent(id, reqID))}
	}
	rec := &s.intents[idx]
	pi := &rec.PaymentIntent
	if !slices.Contains(cancelableStatuses, pi.Status) {
		s.stats.InvalidRequests++
		return outcome{http.StatusBadRequest, unexpectedState(*pi, reqID,
			"You cannot cancel this PaymentIntent because it has a status of "+pi.Status+
				". Only a PaymentIntent with one of the following statuses may be canceled: "+
				strings.Join(cancelableStatuses, ", ")+".")}
	}
	pi.Status = StatusCanceled
	pi.AmountCapturable = 0
	pi.CanceledAt = time.Unix(s.now().Unix(), 0).UTC()
	pi.CancellationReason = p.reason
	s.releaseLocked(pi.ID)
	s.stats.Cancels++
	s.emitLocked("payment_intent.canceled", pi.ID, pi.wire(), requestOf(reqID, idempotencyKey))
	return outcome{http.StatusOK, marshalWire(rec.wireExpanded(p.expandCharge))}
}

// noSuchIntent is Stripe's 404 for an unknown PaymentIntent in the path.
func noSuchIntent(id, reqID string) errorObject {
	return errorObject{
		Type:          typeInvalidRequest,
		Code:          "resource_missing",
		Param:         "intent",
		DocURL:        "https://stripe.com/docs/error-codes/resource-missing",
		Message:       "No such payment_intent: '" + id + "'",
		RequestLogURL: requestLogURL(reqID),
	}
}

// unexpectedState is Stripe's 400 for an operation the PaymentIntent's
// status does not allow: code payment_intent_unexpected_state, the
// PaymentIntent as it is in the error's payment_intent.
func unexpectedState(pi PaymentIntent, reqID, msg string) []byte {
	return errorBody(errorObject{
		Type:          typeInvalidRequest,
		Code:          "payment_intent_unexpected_state",
		DocURL:        "https://stripe.com/docs/error-codes/payment-intent-unexpected-state",
		Message:       msg,
		PaymentIntent: pi.wire(),
		RequestLogURL: requestLogURL(reqID),
	})
}
