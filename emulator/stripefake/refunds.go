package stripefake

import (
	"maps"
	"net/http"
	"net/url"
	"time"
)

// Refund statuses used by the emulator. Stripe also has requires_action and
// canceled, for payment methods that need the customer to act; cards never
// do.
const (
	// RefundSucceeded: the refund went through. It is where a refund of
	// an ordinary test card starts, at once.
	RefundSucceeded = "succeeded"
	// RefundPending: submitted, not settled; its amount is reserved (counts
	// as refunded) until it succeeds or fails.
	RefundPending = "pending"
	// RefundFailed: the refund did not go through; its amount is refundable
	// again. FailureReason says why.
	RefundFailed = "failed"
)

// Failure reasons of failed refunds, among those Stripe documents
// (lost_or_stolen_card, expired_or_canceled_card,
// charge_for_pending_refund_disputed, insufficient_funds, declined,
// merchant_request, unknown), all of which the emulator accepts.
const (
	// RefundFailureExpiredOrCanceledCard is the reason of Stripe's
	// pm_card_refundFail, and the default.
	RefundFailureExpiredOrCanceledCard = "expired_or_canceled_card"
	// RefundFailureLostOrStolenCard: the card was reported lost or stolen.
	RefundFailureLostOrStolenCard = "lost_or_stolen_card"
	// RefundFailureUnknown: the issuer gave no reason.
	RefundFailureUnknown = "unknown"
)

// refundFailureReasons are the failure reasons Stripe documents.
var refundFailureReasons = []string{
	RefundFailureLostOrStolenCard, RefundFailureExpiredOrCanceledCard, "charge_for_pending_refund_disputed",
	"insufficient_funds", "declined", "merchant_request", RefundFailureUnknown,
}

// Refund is a snapshot of one emulated refund.
type Refund struct {
	// ID is "re_" followed by 24 random alphanumerics.
	ID string `json:"id"`
	// PaymentIntent is the id of the refunded PaymentIntent.
	PaymentIntent string `json:"payment_intent"`
	// Charge is the id of the refunded charge, the PaymentIntent's latest.
	Charge string `json:"charge"`
	// Amount is in the currency's smallest unit.
	Amount int64 `json:"amount"`
	// Currency is the PaymentIntent's.
	Currency string `json:"currency"`
	// Status is RefundSucceeded, RefundPending or RefundFailed.
	Status string `json:"status"`
	// Reason is the reason given at creation, if any (one of the
	// RefundReason* constants).
	Reason string `json:"reason,omitempty"`
	// FailureReason says why a failed refund failed.
	FailureReason string `json:"failure_reason,omitempty"`
	// Metadata holds the metadata[...] parameters.
	Metadata map[string]string `json:"metadata"`
	// Created is the creation time, truncated to seconds like Stripe's.
	Created time.Time `json:"created"`
	// IdempotencyKey is the key of the request that created it, if any.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// storedRefund is a refund as the server holds it.
type storedRefund struct {
	Refund
	intent             int // index of its PaymentIntent in Server.intents
	balanceTransaction string
	failureTransaction string // set once failed
}

// refundJSON is the Stripe wire form of a refund.
type refundJSON struct {
	ID                        string            `json:"id"`
	Object                    string            `json:"object"`
	Amount                    int64             `json:"amount"`
	BalanceTransaction        *string           `json:"balance_transaction"`
	Charge                    string            `json:"charge"`
	Created                   int64             `json:"created"`
	Currency                  string            `json:"currency"`
	FailureBalanceTransaction string            `json:"failure_balance_transaction,omitempty"`
	FailureReason             string            `json:"failure_reason,omitempty"`
	Metadata                  map[string]string `json:"metadata"`
	PaymentIntent             string            `json:"payment_intent"`
	Reason                    *string           `json:"reason"`
	ReceiptNumber             *string           `json:"receipt_number"`
	SourceTransferReversal    *string           `json:"source_transfer_reversal"`
	Status                    string            `json:"status"`
	TransferReversal          *string           `json:"transfer_reversal"`
}

// wire renders r in Stripe's JSON shape.
func (r storedRefund) wire() *refundJSON {
	md := r.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return &refundJSON{
		ID:                        r.ID,
		Object:                    "refund",
		Amount:                    r.Amount,
		BalanceTransaction:        optional(r.balanceTransaction),
		Charge:                    r.Charge,
		Created:                   r.Created.Unix(),
		Currency:                  r.Currency,
		FailureBalanceTransaction: r.failureTransaction,
		FailureReason:             r.FailureReason,
		Metadata:                  md,
		PaymentIntent:             r.PaymentIntent,
		Reason:                    optional(r.Reason),
		Status:                    r.Status,
	}
}

// snapshot returns a copy of r's public part that shares nothing with it.
func (r storedRefund) snapshot() Refund {
	out := r.Refund
	out.Metadata = maps.Clone(out.Metadata)
	return out
}

// handleRefundCreate answers POST /v1/refunds, with the idempotency and the
// faults of PaymentIntent creates (see serveWrite).
func (s *Server) handleRefundCreate(w http.ResponseWriter, r *http.Request, apiKey string) {
	s.serveWrite(w, r, apiKey, writeEndpoint{
		op:    OpCreateRefund,
		path:  "/v1/refunds",
		count: func(st *Stats) { st.RefundCreateRequests++ },
		parse: func(form url.Values) (executor, *errorObject) {
			p, perr := parseRefundParams(form)
			if perr != nil {
				return nil, perr
			}
			return func(reqID, key string) outcome { return s.createRefund(p, reqID, key) }, nil
		},
	})
}

// createRefund executes a validated refund create and returns the answer.
// Finding the PaymentIntent, checking what remains refundable and reserving
// the amount happen under one lock, so concurrent refunds never take more
// than was received. Refusals are executed answers: saved for idempotency.
func (s *Server) createRefund(p refundParams, reqID, idempotencyKey string) outcome {
	s.mu.Lock()
	idx, refusal := s.refundable(p)
	if refusal != nil {
		s.stats.InvalidRequests++
		s.stats.RefundsRefused++
		s.mu.Unlock()
		refusal.RequestLogURL = requestLogURL(reqID)
		return outcome{http.StatusBadRequest, errorBody(*refusal)}
	}
	pi := &s.intents[idx].PaymentIntent
	if p.amount == 0 {
		p.amount = pi.AmountReceived - pi.AmountRefunded
	}
	o := s.refundOutcome(pi)

	now := s.now()
	rf := storedRefund{
		Refund: Refund{
			ID:             "re_" + randomID(24),
			PaymentIntent:  pi.ID,
			Charge:         pi.LatestCharge,
			Amount:         p.amount,
			Currency:       pi.Currency,
			Status:         RefundSucceeded,
			Reason:         p.reason,
			Metadata:       p.metadata,
			Created:        time.Unix(now.Unix(), 0).UTC(),
			IdempotencyKey: idempotencyKey,
		},
		intent:             idx,
		balanceTransaction: "txn_" + randomID(24),
	}
	if o.Status == RefundPending {
		rf.Status = RefundPending
	}
	pi.AmountRefunded += rf.Amount
	s.refundByID[rf.ID] = len(s.refunds)
	s.refunds = append(s.refunds, rf)
	s.stats.RefundsCreated++
	s.emitRefundLocked("refund.created", len(s.refunds)-1, requestOf(reqID, idempotencyKey))
	body := marshalWire(rf.wire())
	if o.Status == RefundFailed {
		// Like pm_card_refundFail: the answer says succeeded, every later
		// read says failed.
		s.failRefund(len(s.refunds)-1, o.FailureReason)
	}
	s.mu.Unlock()
	return outcome{http.StatusOK, body}
}

// refundable finds the PaymentIntent a refund create is for and checks that
// the requested amount (zero: all that remains) can be refunded. It returns
// the PaymentIntent's index or Stripe's refusal. A charge whose dispute says
// is_charge_refundable false is refused as charge_disputed, whatever the
// amount. The messages are Stripe's;
// charge_not_refundable and amount_too_large are the closest documented
// codes, which Stripe's own answers may leave out. The caller holds s.mu.
func (s *Server) refundable(p refundParams) (int, *errorObject) {
	idx := -1
	if p.charge != "" {
		byCharge, ok := s.byCharge[p.charge]
		if !ok {
			return -1, noSuch("charge", "charge", p.charge)
		}
		idx = byCharge
	}
	if p.paymentIntent != "" {
		byPI, ok := s.byID[p.paymentIntent]
		if !ok {
			return -1, noSuch("payment_intent", "payment_intent", p.paymentIntent)
		}
		if idx >= 0 && idx != byPI {
			return -1, invalidParam("charge", "",
				"Charge "+p.charge+" does not belong to PaymentIntent "+p.paymentIntent+".")
		}
		idx = byPI
	}
	pi := s.intents[idx].PaymentIntent
	if pi.Status != StatusSucceeded {
		return -1, &errorObject{
			Type:    typeInvalidRequest,
			Code:    "charge_not_refundable",
			Param:   "payment_intent",
			DocURL:  "https://stripe.com/docs/error-codes/charge-not-refundable",
			Message: "This PaymentIntent (" + pi.ID + ") does not have a successful charge to refund.",
		}
	}
	if i, ok := s.disputed[pi.ID]; ok && !s.disputes[i].chargeRefundable() {
		// Stripe's charge_disputed: the dispute's is_charge_refundable is
		// false, the chargeback took the money back already, and a refund
		// would pay the customer twice.
		return -1, &errorObject{
			Type:    typeInvalidRequest,
			Code:    "charge_disputed",
			DocURL:  "https://stripe.com/docs/error-codes/charge-disputed",
			Message: "Charge " + pi.LatestCharge + " has been charged back; cannot issue a refund.",
		}
	}
	remaining := pi.AmountReceived - pi.AmountRefunded
	if remaining <= 0 {
		return -1, &errorObject{
			Type:    typeInvalidRequest,
			Code:    "charge_already_refunded",
			DocURL:  "https://stripe.com/docs/error-codes/charge-already-refunded",
			Message: "Charge " + pi.LatestCharge + " has already been refunded.",
		}
	}
	if p.amount > remaining {
		what := "unrefunded amount on charge"
		if pi.AmountRefunded+pi.released() == 0 {
			what = "charge amount"
		}
		return -1, &errorObject{
			Type:   typeInvalidRequest,
			Code:   "amount_too_large",
			Param:  "amount",
			DocURL: "https://stripe.com/docs/error-codes/amount-too-large",
			Message: "Refund amount (" + formatMoney(p.amount, pi.Currency) + ") is greater than " +
				what + " (" + formatMoney(remaining, pi.Currency) + ")",
		}
	}
	return idx, nil
}

// noSuch is Stripe's resource_missing for an id given in parameter param.
func noSuch(object, param, id string) *errorObject {
	return &errorObject{
		Type:    typeInvalidRequest,
		Code:    "resource_missing",
		Param:   param,
		DocURL:  "https://stripe.com/docs/error-codes/resource-missing",
		Message: "No such " + object + ": '" + id + "'",
	}
}

// failRefund moves refund i to failed: its amount becomes refundable again.
// The caller holds s.mu and has checked that the refund is not failed yet.
func (s *Server) failRefund(i int, reason string) {
	rf := &s.refunds[i]
	before := rf.wire()
	if reason == "" {
		reason = RefundFailureExpiredOrCanceledCard
	}
	rf.Status = RefundFailed
	rf.FailureReason = reason
	rf.failureTransaction = "txn_" + randomID(24)
	s.intents[rf.intent].AmountRefunded -= rf.Amount
	s.stats.RefundsFailed++
	s.emitRefundUpdatedLocked(i, before)
}

// handleRefundRetrieve answers GET /v1/refunds/{id}; strongly consistent.
func (s *Server) handleRefundRetrieve(w http.ResponseWriter, r *http.Request, _ string) {
	id := r.PathValue("id")
	s.mu.Lock()
	s.stats.RefundRetrieves++
	i, ok := s.refundByID[id]
	var body []byte
	if ok {
		body = marshalWire(s.refunds[i].wire())
	} else {
		s.stats.InvalidRequests++
	}
	s.mu.Unlock()
	if !ok {
		e := noSuch("refund", "id", id)
		e.RequestLogURL = requestLogURL(w.Header().Get("Request-Id"))
		writeError(w, http.StatusNotFound, *e)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// Refunds returns a snapshot of all refunds in creation order.
func (s *Server) Refunds() []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Refund, len(s.refunds))
	for i, rf := range s.refunds {
		out[i] = rf.snapshot()
	}
	return out
}
