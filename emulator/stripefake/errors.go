package stripefake

import (
	"encoding/json"
	"net/http"
)

// Stripe error types.
const (
	typeAPI            = "api_error"
	typeCard           = "card_error"
	typeIdempotency    = "idempotency_error"
	typeInvalidRequest = "invalid_request_error"
)

// errorObject is Stripe's error object, as found under "error" in error
// answers and as a PaymentIntent's last_payment_error.
type errorObject struct {
	Charge        string             `json:"charge,omitempty"`
	Code          string             `json:"code,omitempty"`
	DeclineCode   string             `json:"decline_code,omitempty"`
	DocURL        string             `json:"doc_url,omitempty"`
	Message       string             `json:"message"`
	Param         string             `json:"param,omitempty"`
	PaymentIntent *paymentIntentJSON `json:"payment_intent,omitempty"`
	PaymentMethod *paymentMethodJSON `json:"payment_method,omitempty"`
	RequestLogURL string             `json:"request_log_url,omitempty"`
	Type          string             `json:"type"`
}

// errorEnvelope is the body of every Stripe error answer.
type errorEnvelope struct {
	Error errorObject `json:"error"`
}

// errorBody encodes e as a Stripe error answer body.
func errorBody(e errorObject) []byte {
	b, err := json.Marshal(errorEnvelope{Error: e})
	if err != nil {
		// Only plain strings and known structs are encoded; cannot happen.
		panic("stripefake: encoding error body: " + err.Error())
	}
	return b
}

// writeError writes a Stripe error answer.
func writeError(w http.ResponseWriter, status int, e errorObject) {
	writeJSON(w, status, errorBody(e))
}

// requestLogURL is the dashboard link Stripe puts into error answers.
func requestLogURL(reqID string) string {
	return "https://dashboard.stripe.com/test/logs/" + reqID
}

// missingParam is Stripe's answer for an absent required parameter.
func missingParam(name string) *errorObject {
	return &errorObject{
		Type:    typeInvalidRequest,
		Code:    "parameter_missing",
		Param:   name,
		DocURL:  "https://stripe.com/docs/error-codes/parameter-missing",
		Message: "Missing required param: " + name + ".",
	}
}

// invalidParam is Stripe's answer for a parameter with a bad value.
func invalidParam(name, code, msg string) *errorObject {
	return &errorObject{Type: typeInvalidRequest, Code: code, Param: name, Message: msg}
}
