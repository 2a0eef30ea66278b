// Package problem defines the RFC 9457 problem details paymentsd answers
// with: one Type per kind of failure, each with a stable type URI that
// api/openapi.yaml documents.
package problem

import (
	"encoding/json"
	"net/http"
)

// ContentType is the media type of every error response.
const ContentType = "application/problem+json"

// TypeBase prefixes every problem type URI.
const TypeBase = "https://paymentsd.dev/problems/"

// Type is one kind of problem: its URI slug, its title and its status code.
type Type struct {
	Slug   string
	Title  string
	Status int
}

// URI is the problem type's stable identifier.
func (t Type) URI() string { return TypeBase + t.Slug }

// The problem types, one per documented failure.
var (
	InvalidRequest        = Type{"invalid-request", "Invalid request", http.StatusBadRequest}
	IdempotencyKeyMissing = Type{"idempotency-key-missing", "Idempotency-Key header missing", http.StatusBadRequest}
	IdempotencyKeyInvalid = Type{"idempotency-key-invalid", "Idempotency-Key header invalid", http.StatusBadRequest}
	PaymentRejected       = Type{"payment-rejected", "Payment rejected by the processor", http.StatusBadRequest}
	RefundExceedsPayment  = Type{"refund-exceeds-payment", "Refund exceeds what remains of the payment", http.StatusBadRequest}
	PaymentNotRefundable  = Type{"payment-not-refundable", "Payment not refundable", http.StatusBadRequest}
	RefundRejected        = Type{"refund-rejected", "Refund rejected by the processor", http.StatusBadRequest}
	PaymentChargedBack    = Type{"payment-charged-back", "Payment charged back", http.StatusBadRequest}
	PaymentNotCapturable  = Type{"payment-not-capturable", "Payment not capturable", http.StatusBadRequest}
	PaymentNotCancelable  = Type{"payment-not-cancelable", "Payment not cancelable", http.StatusBadRequest}
	// CaptureExceedsAuthorization: a capture of more than was authorized.
	CaptureExceedsAuthorization = Type{"capture-exceeds-authorization", "Capture exceeds the authorization", http.StatusBadRequest}
	Unauthorized                = Type{"unauthorized", "Unauthorized", http.StatusUnauthorized}
	InvalidSignature            = Type{"invalid-signature", "Invalid webhook signature", http.StatusBadRequest}
	CardDeclined                = Type{"card-declined", "Card declined", http.StatusPaymentRequired}
	NotFound                    = Type{"not-found", "Not found", http.StatusNotFound}
	MethodNotAllowed            = Type{"method-not-allowed", "Method not allowed", http.StatusMethodNotAllowed}
	IdempotencyKeyInUse         = Type{"idempotency-key-in-use", "Idempotency key in use", http.StatusConflict}
	RequestTooLarge             = Type{"request-too-large", "Request too large", http.StatusRequestEntityTooLarge}
	UnsupportedMediaType        = Type{"unsupported-media-type", "Unsupported media type", http.StatusUnsupportedMediaType}
	IdempotencyKeyReused        = Type{"idempotency-key-reused", "Idempotency key reused", http.StatusUnprocessableEntity}
	IdempotencyKeyExpired       = Type{"idempotency-key-expired", "Idempotency key expired", http.StatusUnprocessableEntity}
	RateLimited                 = Type{"rate-limited", "Too many new idempotency keys", http.StatusTooManyRequests}
	TooManyUnfinishedKeys       = Type{"too-many-unfinished-keys", "Too many unfinished idempotency keys", http.StatusTooManyRequests}
	ProcessorUnavailable        = Type{"processor-unavailable", "Payment processor unavailable", http.StatusServiceUnavailable}
	StoreUnavailable            = Type{"store-unavailable", "Store unavailable", http.StatusServiceUnavailable}
	NeedsAttention              = Type{"needs-attention", "Awaiting an operator", http.StatusServiceUnavailable}
	MigrationsPending           = Type{"migrations-pending", "Database migrations pending", http.StatusServiceUnavailable}
	InternalError               = Type{"internal-error", "Internal error", http.StatusInternalServerError}
)

// FieldError points at one invalid member of a request body.
type FieldError struct {
	// Pointer is a JSON Pointer (RFC 6901) into the request body.
	Pointer string `json:"pointer"`
	Detail  string `json:"detail"`
}

// Problem is an RFC 9457 problem details object with paymentsd's extensions.
type Problem struct {
	Type          string       `json:"type"`
	Title         string       `json:"title"`
	Status        int          `json:"status"`
	Detail        string       `json:"detail,omitempty"`
	Errors        []FieldError `json:"errors,omitempty"`
	PaymentID     string       `json:"payment_id,omitempty"`
	RefundID      string       `json:"refund_id,omitempty"`
	DeclineCode   string       `json:"decline_code,omitempty"`
	ProcessorCode string       `json:"processor_code,omitempty"`
}

// New returns a problem of type t with a human-readable detail.
func New(t Type, detail string) *Problem {
	return &Problem{Type: t.URI(), Title: t.Title, Status: t.Status, Detail: detail}
}

// JSON encodes the problem. A Problem holds only strings and numbers, so
// encoding cannot fail.
func (p *Problem) JSON() []byte {
	b, _ := json.Marshal(p)
	return b
}
