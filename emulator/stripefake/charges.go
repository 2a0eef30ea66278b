package stripefake

import (
	"net/url"
	"slices"
	"strings"
)

// chargeJSON is the Stripe wire form of the charge behind a confirmed
// PaymentIntent. It is only rendered when a request expands latest_charge;
// the emulator has no /v1/charges endpoint.
type chargeJSON struct {
	ID             string             `json:"id"`
	Object         string             `json:"object"`
	Amount         int64              `json:"amount"`
	AmountCaptured int64              `json:"amount_captured"`
	AmountRefunded int64              `json:"amount_refunded"`
	BillingDetails billingDetailsJSON `json:"billing_details"`
	Captured       bool               `json:"captured"`
	Created        int64              `json:"created"`
	Currency       string             `json:"currency"`
	Description    *string            `json:"description"`
	Disputed       bool               `json:"disputed"`
	FailureCode    *string            `json:"failure_code"`
	FailureMessage *string            `json:"failure_message"`
	Livemode       bool               `json:"livemode"`
	Metadata       map[string]string  `json:"metadata"`
	Paid           bool               `json:"paid"`
	PaymentIntent  string             `json:"payment_intent"`
	PaymentMethod  string             `json:"payment_method"`
	Refunded       bool               `json:"refunded"`
	Status         string             `json:"status"`
}

// chargeWire renders the latest charge of pi, or nil if it has none. Its
// amount_refunded counts succeeded and pending refunds, as Stripe's does,
// and what an authorization released without capturing it (the part a
// partial capture left, all of it when canceled), as Stripe refunds that;
// refunded is true once all of it is refunded; disputed says whether it
// has a dispute. An authorization not captured yet is captured false.
func (pi PaymentIntent) chargeWire(disputed bool) *chargeJSON {
	if pi.LatestCharge == "" {
		return nil
	}
	md := pi.Metadata
	if md == nil {
		md = map[string]string{}
	}
	c := &chargeJSON{
		ID:             pi.LatestCharge,
		Object:         "charge",
		Amount:         pi.Amount,
		AmountCaptured: pi.AmountReceived,
		AmountRefunded: pi.AmountRefunded,
		BillingDetails: noBillingDetails(),
		Created:        pi.Created.Unix(),
		Currency:       pi.Currency,
		Description:    optional(pi.Description),
		Disputed:       disputed,
		Metadata:       md,
		PaymentIntent:  pi.ID,
		PaymentMethod:  pi.PaymentMethod,
		Status:         "succeeded",
	}
	if pi.DeclineCode != "" {
		c.Status = "failed"
		c.FailureCode = optional("card_declined")
		c.FailureMessage = optional(declineMessage(pi.DeclineCode))
		return c
	}
	if pi.Status == StatusProcessing {
		c.Status = "pending"
		return c
	}
	c.Paid = true
	c.Captured = pi.Status == StatusSucceeded
	c.AmountRefunded = pi.AmountRefunded + pi.released()
	c.Refunded = c.AmountRefunded > 0 && c.AmountRefunded >= c.Amount
	return c
}

// released is what an authorization of pi gave back without capturing
// it: the part a capture did not take, or all of it once canceled.
func (pi PaymentIntent) released() int64 {
	switch {
	case pi.Status == StatusSucceeded:
		return pi.Amount - pi.AmountReceived
	case pi.Status == StatusCanceled && pi.LatestCharge != "" && pi.DeclineCode == "":
		// Only an authorization (requires_capture) is canceled with a
		// charge that did not fail.
		return pi.Amount
	}
	return 0
}

// expands reports whether the expand parameters of a request (expand,
// expand[] or expand[N]) ask for path, e.g. "latest_charge" or
// "data.latest_charge".
func expands(form url.Values, path string) bool {
	for k, vals := range form {
		if k == "expand" || (strings.HasPrefix(k, "expand[") && strings.HasSuffix(k, "]")) {
			if slices.Contains(vals, path) {
				return true
			}
		}
	}
	return false
}

// wireWith renders pi, with its latest charge expanded if expand is set
// (disputed: whether that charge has a dispute).
func (pi PaymentIntent) wireWith(expand, disputed bool) *paymentIntentJSON {
	j := pi.wire()
	if c := pi.chargeWire(disputed); expand && c != nil {
		j.LatestCharge = c
	}
	return j
}
