package stripefake

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// ErrAlreadyDisputed: OpenDispute was given a PaymentIntent whose charge has
// a dispute already (Stripe opens at most one per charge).
var ErrAlreadyDisputed = errors.New("stripefake: the charge is disputed already")

// DisputeStatusNeedsResponse is the status a dispute opens in: a
// chargeback, its amount already withdrawn from the account, awaiting the
// merchant's evidence. It is the only status the emulator's disputes have.
const DisputeStatusNeedsResponse = "needs_response"

// disputeReasons are the dispute reasons Stripe documents.
var disputeReasons = []string{
	"bank_cannot_process", "check_returned", "credit_not_processed", "customer_initiated",
	"debit_not_authorized", "duplicate", "fraudulent", "general", "incorrect_account_details",
	"insufficient_funds", "product_not_received", "product_unacceptable", "subscription_canceled",
	"unrecognized",
}

// Dispute is a snapshot of one dispute: a cardholder contesting a charge
// with their bank. Stripe opens them; the emulator, when told to.
type Dispute struct {
	// ID is "dp_" followed by 24 random alphanumerics.
	ID string `json:"id"`
	// PaymentIntent and Charge are the disputed PaymentIntent and its charge.
	PaymentIntent string `json:"payment_intent"`
	Charge        string `json:"charge"`
	// Amount is what the charge received, in the smallest unit.
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// Reason is one of the reasons Stripe documents.
	Reason string `json:"reason"`
	// Status is DisputeStatusNeedsResponse.
	Status string `json:"status"`
	// Created is the time it was opened, truncated to seconds.
	Created time.Time `json:"created"`
}

// disputeJSON is the Stripe wire form of a dispute.
type disputeJSON struct {
	ID                  string            `json:"id"`
	Object              string            `json:"object"`
	Amount              int64             `json:"amount"`
	BalanceTransactions []any             `json:"balance_transactions"`
	Charge              string            `json:"charge"`
	Created             int64             `json:"created"`
	Currency            string            `json:"currency"`
	Evidence            map[string]any    `json:"evidence"`
	EvidenceDetails     evidenceDetails   `json:"evidence_details"`
	IsChargeRefundable  bool              `json:"is_charge_refundable"`
	Livemode            bool              `json:"livemode"`
	Metadata            map[string]string `json:"metadata"`
	PaymentIntent       string            `json:"payment_intent"`
	Reason              string            `json:"reason"`
	Status              string            `json:"status"`
}

// wire renders d in Stripe's JSON shape.
func (d Dispute) wire() *disputeJSON {
	return &disputeJSON{
		ID: d.ID, Object: "dispute", Amount: d.Amount, BalanceTransactions: []any{}, Charge: d.Charge,
		Created: d.Created.Unix(), Currency: d.Currency, Evidence: noEvidence(),
		EvidenceDetails:    evidenceDetails{DueBy: d.Created.Add(evidenceWindow).Unix()},
		IsChargeRefundable: d.chargeRefundable(), Metadata: map[string]string{},
		PaymentIntent: d.PaymentIntent, Reason: d.Reason, Status: d.Status,
	}
}

// chargeRefundable is the dispute's is_charge_refundable, which Stripe
// documents as "If true, it's still possible to refund the disputed
// payment": true only for an inquiry (the warning_* statuses), where no
// money has moved yet; false once the dispute is a chargeback
// (needs_response, under_review, won, lost), its amount withdrawn from the
// account. A refund create of a charge whose dispute says false is refused
// with charge_disputed (see refundable). The emulator opens only
// needs_response disputes, so this is false for every one it makes; the
// rule is written by status so that inquiries, if added, stay refundable.
func (d Dispute) chargeRefundable() bool {
	return strings.HasPrefix(d.Status, "warning_")
}

// OpenDispute opens a dispute of the succeeded charge of a PaymentIntent,
// as a cardholder's bank would, and (with webhooks) sends
// charge.dispute.created. reason is one Stripe documents; empty means
// "fraudulent". It returns ErrNoSuchPaymentIntent for an unknown id,
// ErrAlreadyDisputed for a second dispute, and an error for a PaymentIntent
// that did not succeed or an unknown reason.
func (s *Server) OpenDispute(paymentIntentID, reason string) (Dispute, error) {
	if reason == "" {
		reason = "fraudulent"
	}
	if !slices.Contains(disputeReasons, reason) {
		return Dispute{}, fmt.Errorf("stripefake: invalid dispute reason %q (want one of %v)", reason, disputeReasons)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	idx, ok := s.byID[paymentIntentID]
	if !ok {
		return Dispute{}, fmt.Errorf("%w: %q", ErrNoSuchPaymentIntent, paymentIntentID)
	}
	pi := s.intents[idx].PaymentIntent
	if pi.Status != StatusSucceeded {
		return Dispute{}, fmt.Errorf("stripefake: PaymentIntent %s is %s: it has no successful charge to dispute", pi.ID, pi.Status)
	}
	if i, ok := s.disputed[pi.ID]; ok {
		return Dispute{}, fmt.Errorf("%w: charge %s has dispute %s", ErrAlreadyDisputed, pi.LatestCharge, s.disputes[i].ID)
	}
	d := Dispute{
		ID: "dp_" + randomID(24), PaymentIntent: pi.ID, Charge: pi.LatestCharge, Amount: pi.AmountReceived,
		Currency: pi.Currency, Reason: reason, Status: DisputeStatusNeedsResponse,
		Created: time.Unix(s.now().Unix(), 0).UTC(),
	}
	s.intents[idx].disputed = true
	s.disputed[pi.ID] = len(s.disputes)
	s.disputes = append(s.disputes, d)
	s.stats.Disputes++
	s.emitLocked("charge.dispute.created", d.ID, d.wire(), eventRequest{})
	return d, nil
}

// Disputes returns a snapshot of every dispute, in the order they opened.
func (s *Server) Disputes() []Dispute {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.disputes)
}

// AdminDisputeRequest is the body of POST /_fake/disputes, the JSON form of
// OpenDispute. The answer is the Dispute.
type AdminDisputeRequest struct {
	// PaymentIntent is the id of the succeeded PaymentIntent; required.
	PaymentIntent string `json:"payment_intent"`
	// Reason is one Stripe documents; empty means "fraudulent".
	Reason string `json:"reason,omitempty"`
}

// handleAdminDisputeCreate answers POST /_fake/disputes: 404 for an unknown
// PaymentIntent, 400 for one that cannot be disputed.
func (s *Server) handleAdminDisputeCreate(w http.ResponseWriter, r *http.Request) {
	var req AdminDisputeRequest
	if !decodeAdmin(w, r, &req) {
		return
	}
	d, err := s.OpenDispute(req.PaymentIntent, req.Reason)
	if err != nil {
		adminControlError(w, err)
		return
	}
	writeValue(w, http.StatusOK, d)
}

// handleAdminDisputes answers GET /_fake/disputes.
func (s *Server) handleAdminDisputes(w http.ResponseWriter, _ *http.Request) {
	writeValue(w, http.StatusOK, s.Disputes())
}

// handleAdminEvents answers GET /_fake/events: every event made, oldest
// first, with what became of its deliveries; ?type= and ?object_id= filter.
func (s *Server) handleAdminEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	typ, object := q.Get("type"), q.Get("object_id")
	out := []Event{}
	for _, ev := range s.Events() {
		if (typ == "" || ev.Type == typ) && (object == "" || ev.ObjectID == object) {
			out = append(out, ev)
		}
	}
	writeValue(w, http.StatusOK, out)
}
