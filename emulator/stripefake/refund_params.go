package stripefake

import (
	"net/url"
	"strconv"
)

// Refund reasons a client may give, as Stripe documents them.
const (
	// RefundReasonDuplicate: the charge was a duplicate.
	RefundReasonDuplicate = "duplicate"
	// RefundReasonFraudulent: the charge was fraudulent.
	RefundReasonFraudulent = "fraudulent"
	// RefundReasonRequestedByCustomer: the customer asked for the refund.
	RefundReasonRequestedByCustomer = "requested_by_customer"
)

// refundParamNames are the parameters Stripe's POST /v1/refunds knows at
// API version 2024-06-20; any other is refused (unknownParam).
var refundParamNames = []string{
	"amount", "charge", "currency", "customer", "expand", "instructions_email", "metadata", "origin",
	"payment_intent", "reason", "refund_application_fee", "reverse_transfer",
}

// refundParams are the parameters of POST /v1/refunds the emulator
// understands; the others Stripe knows (customer, instructions_email,
// origin, refund_application_fee, reverse_transfer, expand) are accepted
// and ignored, and currency is only checked to be one Stripe supports.
type refundParams struct {
	paymentIntent string
	charge        string
	amount        int64 // 0: all that remains refundable
	reason        string
	metadata      map[string]string
}

// parseRefundParams validates the form of a refund create. A non-nil error
// is a validation failure detected before execution (never saved for
// idempotency). Whether the PaymentIntent or charge exists and what remains
// refundable are decided by the execution.
func parseRefundParams(form url.Values) (refundParams, *errorObject) {
	var p refundParams
	if perr := unknownParam(form, refundParamNames); perr != nil {
		return p, perr
	}
	p.paymentIntent, _ = single(form, "payment_intent")
	p.charge, _ = single(form, "charge")
	if p.paymentIntent == "" && p.charge == "" {
		return p, missingParam("payment_intent")
	}

	if raw, _ := single(form, "amount"); raw != "" {
		amount, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return p, invalidParam("amount", "parameter_invalid_integer", "Invalid integer: "+raw)
		}
		if amount < 1 {
			return p, invalidParam("amount", "parameter_invalid_integer", "Invalid positive integer")
		}
		p.amount = amount
	}

	if c, _ := single(form, "currency"); c != "" {
		if _, perr := currencyParam("currency", c); perr != nil {
			return p, perr
		}
	}

	switch reason, _ := single(form, "reason"); reason {
	case "", RefundReasonDuplicate, RefundReasonFraudulent, RefundReasonRequestedByCustomer:
		p.reason = reason
	default:
		return p, invalidParam("reason", "",
			"Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer")
	}

	md, perr := metadataParam(form)
	if perr != nil {
		return p, perr
	}
	p.metadata = md
	return p, nil
}
