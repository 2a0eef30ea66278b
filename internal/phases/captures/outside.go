package captures

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/intent"
)

// Who finds a capture made outside paymentsd, the values of ObserveOutside's
// argument (the metric's found_by label).
const (
	FoundByCapture  = "capture"
	FoundByCancel   = "cancel"
	FoundByWebhook  = "webhook"
	FoundByOperator = "operator"
)

// ObserveOutside is told of each authorization recorded captured by a
// capture that no key of paymentsd made: the PaymentIntent succeeded with no
// paymentsd_capture_intent metadata (captured in the Dashboard, or by another
// integration on the account). The payment is recorded as Stripe says, and
// no key is answered the capture as its own; an operator must find out who
// took the money, and why.
type ObserveOutside func(foundBy string)

// capturedOutside reports whether out is such a capture.
func capturedOutside(out *Outcome) bool {
	return out.Captured && out.CapturedBy == ""
}

// outsideReason says what was found, for the log and the event's alarm.
// It names the payment and the PaymentIntent, never the customer.
func outsideReason(payment *dbsqlc.Payment, out *Outcome) string {
	pi := ""
	if payment.StripePaymentIntentID != nil {
		pi = *payment.StripePaymentIntentID
	}
	return fmt.Sprintf("PaymentIntent %s of payment %d was captured for %d outside paymentsd (no %s metadata): recorded as Stripe says, answered to no key as its own",
		pi, payment.ID, out.AmountCaptured, intent.MetadataCaptureIntent)
}

// alarmOutside raises the alarm of a capture made outside paymentsd, found
// by a capture or cancel run or an operator: a warning, and the metric.
// (An event's alarm is the webhook handler's to log: see EventSettler.)
func alarmOutside(ctx context.Context, observe ObserveOutside, foundBy string, payment *dbsqlc.Payment, out *Outcome) {
	zerolog.Ctx(ctx).Warn().Int64("payment_id", payment.ID).Str("found_by", foundBy).
		Msg("alarm: " + outsideReason(payment, out))
	if observe != nil {
		observe(foundBy)
	}
}
