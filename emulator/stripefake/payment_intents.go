package stripefake

import (
	"encoding/json"
	"maps"
	"net/http"
	"time"
)

// PaymentIntent statuses used by the emulator.
const (
	// StatusRequiresPaymentMethod: created without a payment method, or the
	// confirmation was declined.
	StatusRequiresPaymentMethod = "requires_payment_method"
	// StatusRequiresConfirmation: created with a payment method, not confirmed.
	StatusRequiresConfirmation = "requires_confirmation"
	// StatusSucceeded: confirmed and charged.
	StatusSucceeded = "succeeded"
	// StatusProcessing: confirmed, the charge not settled yet, as Stripe
	// shows asynchronous payment methods. Only pm_card_processing stays
	// here, until SetPaymentIntentStatus moves it on.
	StatusProcessing = "processing"
	// StatusRequiresCapture: confirmed with capture_method=manual and
	// authorized: AmountCapturable is held on the card until a capture
	// (then StatusSucceeded) or a cancel (StatusCanceled), or until
	// Options.AuthorizationWindow has passed since its creation, when the
	// emulator cancels it (CancellationReason "automatic").
	StatusRequiresCapture = "requires_capture"
	// StatusCanceled: canceled by POST /v1/payment_intents/{id}/cancel, or
	// by the emulator when an authorization was not captured in time.
	StatusCanceled = "canceled"
)

// Capture methods: when the funds of a confirmed PaymentIntent are taken.
const (
	// captureAutomaticAsync is Stripe's default since API version
	// 2024-04-10: captured at once, the balance transaction made later.
	captureAutomaticAsync = "automatic_async"
	// captureAutomatic: captured at once.
	captureAutomatic = "automatic"
	// captureManual: only authorized; POST /v1/payment_intents/{id}/capture
	// takes the funds.
	captureManual = "manual"
)

// PaymentIntent is a snapshot of one emulated PaymentIntent.
type PaymentIntent struct {
	// ID is "pi_" followed by 24 random alphanumerics.
	ID string `json:"id"`
	// Amount is in the currency's smallest unit.
	Amount int64 `json:"amount"`
	// AmountReceived is what was captured: Amount once a PaymentIntent
	// with automatic capture succeeded, the amount captured (Amount or
	// less) once a manual one was.
	AmountReceived int64 `json:"amount_received"`
	// AmountCapturable is what an authorization holds: Amount while the
	// PaymentIntent is requires_capture, zero otherwise.
	AmountCapturable int64 `json:"amount_capturable"`
	// CaptureMethod is "automatic_async" (Stripe's default), "automatic"
	// or "manual", as given at creation.
	CaptureMethod string `json:"capture_method"`
	// Currency is the lowercase ISO code.
	Currency string `json:"currency"`
	// Status is one of the Status* constants.
	Status string `json:"status"`
	// PaymentMethod is the payment method given at creation. For a declined
	// PaymentIntent it is the one that was declined; Stripe's JSON then
	// shows payment_method null and the method under last_payment_error.
	PaymentMethod string `json:"payment_method"`
	// Description is the optional description.
	Description string `json:"description"`
	// Metadata holds the metadata[...] parameters.
	Metadata map[string]string `json:"metadata"`
	// Created is the creation time, truncated to seconds like Stripe's.
	Created time.Time `json:"created"`
	// LatestCharge is the "ch_..." id of the charge attempt, if confirmed.
	LatestCharge string `json:"latest_charge,omitempty"`
	// AmountRefunded is what its refunds took back from the latest charge:
	// succeeded and pending refunds count, failed ones do not. It is the
	// charge's amount_refunded; AmountReceived minus AmountRefunded is what
	// remains refundable.
	AmountRefunded int64 `json:"amount_refunded"`
	// ClientSecret is Stripe's client secret.
	ClientSecret string `json:"client_secret"`
	// CanceledAt is when it was canceled, truncated to seconds; zero unless
	// canceled. For an authorization the emulator canceled (reason
	// "automatic") it is when the authorization window ended.
	CanceledAt time.Time `json:"canceled_at,omitzero"`
	// CancellationReason is the reason given to cancel it (abandoned,
	// duplicate, fraudulent, requested_by_customer), "automatic" for an
	// authorization not captured in time, empty if none.
	CancellationReason string `json:"cancellation_reason,omitempty"`
	// DeclineCode is set when the confirmation was declined, or a
	// processing PaymentIntent failed (SetPaymentIntentStatus).
	DeclineCode string `json:"decline_code,omitempty"`
	// IdempotencyKey is the key of the request that created it, if any.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// storedIntent is a PaymentIntent as the server holds it: with the exact
// instant of its creation, from which the search lag is measured.
type storedIntent struct {
	PaymentIntent
	createdAt time.Time
	disputed  bool // its charge has a dispute (OpenDispute)
}

// wireExpanded renders the PaymentIntent, with its latest charge expanded
// if expand is set.
func (rec storedIntent) wireExpanded(expand bool) *paymentIntentJSON {
	return rec.wireWith(expand, rec.disputed)
}

// testCard describes how a Stripe test payment method behaves.
type testCard struct {
	brand       string
	last4       string
	declineCode string // empty: the charge succeeds
	refunds     string // how its refunds start: "" (succeeded), RefundPending or RefundFailed
	processing  bool   // the PaymentIntent stays processing (pm_card_processing)
}

// testCards are the payment method ids the emulator knows.
var testCards = map[string]testCard{
	"pm_card_visa":                            {brand: "visa", last4: "4242"},
	"pm_card_mastercard":                      {brand: "mastercard", last4: "4444"},
	"pm_card_amex":                            {brand: "amex", last4: "8431"},
	"pm_card_chargeDeclined":                  {brand: "visa", last4: "0002", declineCode: "generic_decline"},
	"pm_card_chargeDeclinedInsufficientFunds": {brand: "visa", last4: "9995", declineCode: "insufficient_funds"},
	"pm_card_chargeDeclinedLostCard":          {brand: "visa", last4: "9987", declineCode: "lost_card"},
	"pm_card_chargeDeclinedStolenCard":        {brand: "visa", last4: "9979", declineCode: "stolen_card"},
	// Stripe's refund test cards: the charge succeeds; a refund starts
	// pending, or fails after answering succeeded (see RefundOutcome).
	"pm_card_pendingRefund": {brand: "visa", last4: "7726", refunds: RefundPending},
	"pm_card_refundFail":    {brand: "visa", last4: "5126", refunds: RefundFailed},
	// The emulator's own, not Stripe's (Stripe's cards settle at once): the
	// PaymentIntent stays processing, as with an asynchronous payment
	// method, until SetPaymentIntentStatus moves it on.
	"pm_card_processing": {brand: "visa", last4: "4242", processing: true},
}

// paymentIntentJSON is the Stripe wire form of a PaymentIntent.
type paymentIntentJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CanceledAt         *int64            `json:"canceled_at"`
	CancellationReason *string           `json:"cancellation_reason"`
	CaptureMethod      string            `json:"capture_method"`
	ClientSecret       string            `json:"client_secret"`
	ConfirmationMethod string            `json:"confirmation_method"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Description        *string           `json:"description"`
	LastPaymentError   *errorObject      `json:"last_payment_error"`
	LatestCharge       any               `json:"latest_charge"` // nil, an id, or an expanded *chargeJSON
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	PaymentMethod      *string           `json:"payment_method"`
	PaymentMethodTypes []string          `json:"payment_method_types"`
	Status             string            `json:"status"`
}

// paymentMethodJSON is the Stripe wire form of a (card) PaymentMethod.
type paymentMethodJSON struct {
	ID             string             `json:"id"`
	Object         string             `json:"object"`
	BillingDetails billingDetailsJSON `json:"billing_details"`
	Card           cardJSON           `json:"card"`
	Created        int64              `json:"created"`
	Customer       *string            `json:"customer"`
	Livemode       bool               `json:"livemode"`
	Metadata       map[string]string  `json:"metadata"`
	Type           string             `json:"type"`
}

// cardJSON is the card hash of a PaymentMethod.
type cardJSON struct {
	Brand    string `json:"brand"`
	Last4    string `json:"last4"`
	ExpMonth int    `json:"exp_month"`
	ExpYear  int    `json:"exp_year"`
	Funding  string `json:"funding"`
}

// optional maps "" to JSON null.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// optionalAny is optional for a field that may also hold an expanded object.
func optionalAny(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// wire renders pi in Stripe's JSON shape.
func (pi PaymentIntent) wire() *paymentIntentJSON {
	md := pi.Metadata
	if md == nil {
		md = map[string]string{}
	}
	j := &paymentIntentJSON{
		ID:                 pi.ID,
		Object:             "payment_intent",
		Amount:             pi.Amount,
		AmountCapturable:   pi.AmountCapturable,
		AmountReceived:     pi.AmountReceived,
		CancellationReason: optional(pi.CancellationReason),
		CaptureMethod:      pi.CaptureMethod,
		ClientSecret:       pi.ClientSecret,
		ConfirmationMethod: "automatic",
		Created:            pi.Created.Unix(),
		Currency:           pi.Currency,
		Description:        optional(pi.Description),
		LatestCharge:       optionalAny(pi.LatestCharge),
		Metadata:           md,
		PaymentMethod:      optional(pi.PaymentMethod),
		PaymentMethodTypes: []string{"card"},
		Status:             pi.Status,
	}
	if j.CaptureMethod == "" {
		j.CaptureMethod = captureAutomaticAsync
	}
	if !pi.CanceledAt.IsZero() {
		at := pi.CanceledAt.Unix()
		j.CanceledAt = &at
	}
	if pi.DeclineCode != "" {
		card := testCards[pi.PaymentMethod]
		j.PaymentMethod = nil
		j.LastPaymentError = &errorObject{
			Type:          typeCard,
			Code:          "card_declined",
			DeclineCode:   pi.DeclineCode,
			Charge:        pi.LatestCharge,
			DocURL:        "https://stripe.com/docs/error-codes/card-declined",
			Message:       declineMessage(pi.DeclineCode),
			PaymentMethod: paymentMethodWire(pi.PaymentMethod, card, pi.Created),
		}
	}
	return j
}

// paymentMethodWire renders a test payment method as used by a
// PaymentIntent created at created: made then, its card expiring in three
// years.
func paymentMethodWire(id string, c testCard, created time.Time) *paymentMethodJSON {
	return &paymentMethodJSON{
		ID: id, Object: "payment_method", BillingDetails: noBillingDetails(),
		Card:    cardJSON{Brand: c.brand, Last4: c.last4, ExpMonth: 12, ExpYear: created.Year() + 3, Funding: "credit"},
		Created: created.Unix(), Metadata: map[string]string{}, Type: "card",
	}
}

// marshalWire encodes a wire object; the structs cannot fail to encode.
func marshalWire(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("stripefake: encoding: " + err.Error())
	}
	return b
}

// createIntent executes a validated create request and returns the answer.
func (s *Server) createIntent(p createParams, reqID, idempotencyKey string) (int, []byte) {
	card, known := testCards[p.paymentMethod]
	if p.paymentMethod != "" && !known {
		s.bump(func(st *Stats) { st.InvalidRequests++ })
		return http.StatusBadRequest, errorBody(errorObject{
			Type:          typeInvalidRequest,
			Code:          "resource_missing",
			Param:         "payment_method",
			DocURL:        "https://stripe.com/docs/error-codes/resource-missing",
			Message:       "No such PaymentMethod: '" + p.paymentMethod + "'",
			RequestLogURL: requestLogURL(reqID),
		})
	}
	id := "pi_" + randomID(24)
	pi := PaymentIntent{
		ID:             id,
		Amount:         p.amount,
		CaptureMethod:  p.captureMethod,
		Currency:       p.currency,
		PaymentMethod:  p.paymentMethod,
		Description:    p.description,
		Metadata:       p.metadata,
		ClientSecret:   id + "_secret_" + randomID(25),
		IdempotencyKey: idempotencyKey,
	}
	switch {
	case p.paymentMethod == "":
		pi.Status = StatusRequiresPaymentMethod
	case !p.confirm:
		pi.Status = StatusRequiresConfirmation
	case card.processing:
		pi.Status = StatusProcessing
		pi.LatestCharge = "ch_" + randomID(24)
	case card.declineCode == "" && p.captureMethod == captureManual:
		// Authorized only: the amount is held until captured.
		pi.Status = StatusRequiresCapture
		pi.AmountCapturable = p.amount
		pi.LatestCharge = "ch_" + randomID(24)
	case card.declineCode == "":
		pi.Status = StatusSucceeded
		pi.AmountReceived = p.amount
		pi.LatestCharge = "ch_" + randomID(24)
	default:
		pi.Status = StatusRequiresPaymentMethod
		pi.LatestCharge = "ch_" + randomID(24)
		pi.DeclineCode = card.declineCode
	}

	// The clock is read under the lock, so that creation order (the order
	// of s.intents, which list and search page by) never contradicts the
	// creation times.
	s.mu.Lock()
	now := s.now()
	pi.Created = time.Unix(now.Unix(), 0).UTC()
	s.byID[pi.ID] = len(s.intents)
	if pi.LatestCharge != "" {
		s.byCharge[pi.LatestCharge] = len(s.intents)
	}
	s.intents = append(s.intents, storedIntent{PaymentIntent: pi, createdAt: now})
	if pi.Status == StatusRequiresCapture {
		s.holdLocked(pi.ID)
	}
	s.stats.PaymentIntentsCreated++
	if pi.DeclineCode != "" {
		s.stats.Declines++
	}
	s.emitIntentLocked(pi, reqID, idempotencyKey)
	s.mu.Unlock()

	if pi.DeclineCode == "" {
		return http.StatusOK, marshalWire(pi.wireWith(p.expandCharge, false))
	}
	wire := pi.wire()
	e := *wire.LastPaymentError
	e.PaymentIntent = wire
	e.RequestLogURL = requestLogURL(reqID)
	return http.StatusPaymentRequired, errorBody(e)
}

// handleRetrieve answers GET /v1/payment_intents/{id}, with the latest
// charge expanded on request (expand[]=latest_charge).
func (s *Server) handleRetrieve(w http.ResponseWriter, r *http.Request, _ string) {
	id := r.PathValue("id")
	s.mu.Lock()
	s.stats.Retrieves++
	idx, ok := s.byID[id]
	var rec storedIntent
	if ok {
		rec = s.intents[idx]
	} else {
		s.stats.InvalidRequests++
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, noSuchIntent(id, w.Header().Get("Request-Id")))
		return
	}
	writeJSON(w, http.StatusOK, marshalWire(rec.wireExpanded(expands(r.URL.Query(), "latest_charge"))))
}

// PaymentIntents returns a snapshot of all PaymentIntents in creation order.
func (s *Server) PaymentIntents() []PaymentIntent {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireDueLocked()
	out := make([]PaymentIntent, len(s.intents))
	for i, rec := range s.intents {
		out[i] = rec.snapshot()
	}
	return out
}

// snapshot returns a copy of pi that shares nothing with it.
func (pi PaymentIntent) snapshot() PaymentIntent {
	pi.Metadata = maps.Clone(pi.Metadata)
	return pi
}
