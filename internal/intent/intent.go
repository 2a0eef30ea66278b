// Package intent names a client's intent towards Stripe: the Stripe
// idempotency keys and the metadata of what paymentsd creates there derive
// from the deployment's namespace, the user and the client's own
// Idempotency-Key, never from a database sequence.
//
// So a run resumed after a crash re-sends the key the lost run sent; a
// client retrying after a failover lost the key's commits reaches Stripe's
// cached answer instead of charging again; and two databases on one Stripe
// account (staging beside production, a rebuilt database) never send each
// other's keys, because their namespaces differ.
package intent

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/google/uuid"
)

// Metadata keys paymentsd writes on every object it creates at Stripe. A
// lookup adopts an object only when all of them match, and amount and
// currency too.
const (
	MetadataNamespace = "paymentsd_namespace"
	MetadataIntent    = "paymentsd_intent"
	MetadataUserID    = "paymentsd_user_id"
	// MetadataCaptureIntent is what a capture, which changes an object
	// instead of creating one, adds to the PaymentIntent it captures: the
	// ID of the capture key's intent. Stripe keeps one capture per
	// PaymentIntent, so it names the one request whose capture took, and a
	// read-back or an event credits that request alone; a capture made
	// outside paymentsd (the Dashboard) has none.
	MetadataCaptureIntent = "paymentsd_capture_intent"
)

// Intent is one client intent: what a user asked for under one key.
type Intent struct {
	// Namespace is the deployment's, created once and stored in its
	// database (table deployment).
	Namespace uuid.UUID
	UserID    int64
	// Key is the client's Idempotency-Key, unquoted.
	Key string
}

// ID is the intent's stable name: 32 hex digits of a SHA-256 over the
// namespace, the user and the key, so a client key of any length fits
// Stripe's 255-character idempotency key and 500-character metadata value.
func (i Intent) ID() string {
	h := sha256.New()
	h.Write([]byte(i.Namespace.String()))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(i.UserID, 10)))
	h.Write([]byte{0})
	h.Write([]byte(i.Key))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// StripeKey is the Stripe idempotency key of the attempt-th try of the
// object kind (say "pi" for a PaymentIntent) for this intent.
func (i Intent) StripeKey(kind string, attempt int) string {
	return "paymentsd-" + kind + "-" + i.ID() + "-" + strconv.Itoa(attempt)
}

// Metadata is what paymentsd writes on the objects it creates for this
// intent. It holds nothing a database sequence made, so a retry after lost
// commits sends the very same parameters.
func (i Intent) Metadata() map[string]string {
	return map[string]string{
		MetadataNamespace: i.Namespace.String(),
		MetadataIntent:    i.ID(),
		MetadataUserID:    strconv.FormatInt(i.UserID, 10),
	}
}

// Owns reports whether metadata names this intent.
func (i Intent) Owns(metadata map[string]string) bool {
	return metadata[MetadataNamespace] == i.Namespace.String() && metadata[MetadataIntent] == i.ID()
}
