package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/webhook"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/phases/refunds"
)

// Tolerance is how old a signature's timestamp may be: Stripe's default.
const Tolerance = 300 * time.Second

// maxEventBytes bounds an event body; Stripe's are far smaller.
const maxEventBytes = 1 << 20

// Handler applies verified Stripe events.
type Handler struct {
	Pool      *db.Pool
	Secret    string
	Namespace uuid.UUID
	Payments  *payments.EventSettler
	Refunds   *refunds.EventSettler
	// Observe, when set, is told what became of every verified event:
	// applied, ignored or duplicate.
	Observe func(eventType, outcome string)
}

// ErrInvalidSignature means the body is not an event Stripe signed with the
// secret within the tolerance.
var ErrInvalidSignature = errors.New("invalid Stripe-Signature")

// Result is what became of one delivery.
type Result struct {
	EventID   string
	Duplicate bool
	// Ignored says why the event changed nothing ("" when it applied).
	Ignored string
	// Alarm says why the event was not applied though it should have been,
	// or contradicts what is recorded ("" when it did not).
	Alarm string
}

// outcome names what became of the delivery, for metrics: applied,
// ignored, alarm or duplicate.
func (r *Result) outcome() string {
	switch {
	case r.Duplicate:
		return "duplicate"
	case r.Alarm != "":
		return "alarm"
	case r.Ignored != "":
		return "ignored"
	}
	return "applied"
}

// Read verifies a delivery and returns its event; ErrInvalidSignature for
// a missing, bad, stale or altered signature.
func (h *Handler) Read(r *http.Request) (*stripe.Event, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxEventBytes))
	if err != nil {
		return nil, fmt.Errorf("%w: the body could not be read", ErrInvalidSignature)
	}
	event, err := webhook.ConstructEventWithOptions(body, r.Header.Get("Stripe-Signature"), h.Secret,
		webhook.ConstructEventOptions{Tolerance: Tolerance, IgnoreAPIVersionMismatch: true})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSignature, err)
	}
	return &event, nil
}

// Apply records event once and applies it, in one transaction. An event
// that contradicts what is recorded (a *phases.AlarmError), or whose
// application fails for good (a constraint, a body that does not decode),
// is kept as an alarm with its reason, logged and counted, and answered
// like any other: a redelivery is a duplicate, never a 500 for ever. Only
// an error that a retry may cure (the store unreachable, a deadlock) rolls
// the delivery back.
func (h *Handler) Apply(ctx context.Context, event *stripe.Event) (*Result, error) {
	res, err := db.WithTxV(ctx, h.Pool, func(ctx context.Context, tx db.Tx) (*Result, error) {
		q := dbsqlc.New()
		_, err := q.StripeEventInsert(ctx, tx, &dbsqlc.StripeEventInsertParams{
			ID: event.ID, Type: string(event.Type), ObjectID: objectID(event), StripeCreated: time.Unix(event.Created, 0),
		})
		if errors.Is(err, db.ErrNotFound) {
			return &Result{EventID: event.ID, Duplicate: true}, nil
		} else if err != nil {
			return nil, fmt.Errorf("error recording event: %w", err)
		}
		res := &Result{EventID: event.ID}
		res.Ignored, err = h.applyOnce(ctx, tx, event)
		var alarm *phases.AlarmError
		switch {
		case errors.As(err, &alarm):
			res.Alarm = alarm.Reason
		case err != nil && db.IsTransient(err):
			return nil, err
		case err != nil:
			res.Alarm = "the event could not be applied: " + err.Error()
		}
		reason := res.Ignored
		if res.Alarm != "" {
			reason = res.Alarm
		}
		if err := q.StripeEventRecord(ctx, tx, &dbsqlc.StripeEventRecordParams{ID: event.ID, Outcome: res.outcome(), Reason: nonEmpty(reason)}); err != nil {
			return nil, fmt.Errorf("error recording event outcome: %w", err)
		}
		return res, nil
	})
	if err == nil && h.Observe != nil {
		h.Observe(string(event.Type), res.outcome())
	}
	return res, err
}

// applyOnce applies event in a savepoint of tx, so that an application
// that fails leaves nothing of itself behind when the event is kept as an
// alarm. An alarm raised on purpose keeps what its settler wrote (a key
// handed back to an operator).
func (h *Handler) applyOnce(ctx context.Context, tx db.Tx, event *stripe.Event) (string, error) {
	sp, err := tx.Savepoint(ctx)
	if err != nil {
		return "", fmt.Errorf("error taking a savepoint: %w", err)
	}
	// What the settler counts (db.AfterCommit) goes with what it wrote.
	spCtx, done := db.SavepointScope(ctx)
	ignored, err := h.apply(spCtx, sp.Tx, event)
	var alarm *phases.AlarmError
	if err != nil && !errors.As(err, &alarm) {
		_ = sp.Rollback(ctx)
		done(false)
		return "", err
	}
	if cerr := sp.Release(ctx); cerr != nil {
		return "", fmt.Errorf("error releasing a savepoint: %w", cerr)
	}
	done(true)
	return ignored, err
}

// apply dispatches by type; it returns why the event changed nothing.
func (h *Handler) apply(ctx context.Context, tx db.Tx, event *stripe.Event) (string, error) {
	switch event.Type {
	case stripe.EventTypePaymentIntentSucceeded, stripe.EventTypePaymentIntentPaymentFailed,
		// A manual payment's: authorized (amount_capturable_updated), then
		// captured (succeeded) or canceled, by us or because it expired.
		stripe.EventTypePaymentIntentAmountCapturableUpdated, stripe.EventTypePaymentIntentCanceled:
		var pi stripe.PaymentIntent
		if err := json.Unmarshal(event.Data.Raw, &pi); err != nil {
			return "", fmt.Errorf("error decoding PaymentIntent: %w", err)
		}
		if why := h.foreign(pi.Metadata); why != "" {
			return why, nil
		}
		payment, err := dbsqlc.New().PaymentLockForEvent(ctx, tx, &dbsqlc.PaymentLockForEventParams{
			StripePaymentIntentID: &pi.ID, IntentID: nonEmpty(pi.Metadata[intent.MetadataIntent]),
		})
		// Money taken (succeeded) or held (requires_capture: a manual
		// payment's authorization) by a PaymentIntent this deployment
		// made.
		ours := payments.HoldsFunds(&pi) && pi.Metadata[intent.MetadataIntent] != ""
		if errors.Is(err, db.ErrNotFound) && ours {
			// A payment declined by another PaymentIntent of this intent
			// records that one: money taken or held for a payment
			// answered "declined", whose key Settle hands to an operator.
			payment, err = dbsqlc.New().PaymentLockDeclinedForIntent(ctx, tx, nonEmpty(pi.Metadata[intent.MetadataIntent]))
		}
		switch {
		case errors.Is(err, db.ErrNotFound) && ours && pi.Status == stripe.PaymentIntentStatusRequiresCapture:
			// The same for an authorization: the customer's funds held
			// where no payment shows them.
			return "", phases.Alarm("PaymentIntent %s of intent %s is requires_capture, and no payment here records it: "+
				"a second authorization holding the customer's funds, or one whose payment was lost", pi.ID, pi.Metadata[intent.MetadataIntent])
		case errors.Is(err, db.ErrNotFound) && ours:
			// Made by this deployment for an intent whose payment records
			// another PaymentIntent, or none any more (a failover lost it):
			// money taken that no payment shows.
			return "", phases.Alarm("PaymentIntent %s of intent %s succeeded, and no payment here records it: a second charge, "+
				"or one whose payment was lost", pi.ID, pi.Metadata[intent.MetadataIntent])
		case errors.Is(err, db.ErrNotFound):
			return "no payment here was made for PaymentIntent " + pi.ID, nil
		case err != nil:
			return "", fmt.Errorf("error locking payment: %w", err)
		}
		return h.Payments.Settle(ctx, tx, payment, &pi)
	case stripe.EventTypeRefundUpdated, stripe.EventTypeRefundCreated, stripe.EventTypeChargeRefundUpdated:
		var sr stripe.Refund
		if err := json.Unmarshal(event.Data.Raw, &sr); err != nil {
			return "", fmt.Errorf("error decoding Refund: %w", err)
		}
		if why := h.foreign(sr.Metadata); why != "" {
			return why, nil
		}
		intentID := sr.Metadata[intent.MetadataIntent]
		refund, err := dbsqlc.New().RefundLockForEvent(ctx, tx, &dbsqlc.RefundLockForEventParams{
			StripeRefundID: &sr.ID, IntentID: nonEmpty(intentID),
		})
		if errors.Is(err, db.ErrNotFound) && intentID != "" && sr.PaymentIntent != nil {
			// Made by this deployment for an intent whose refund records
			// another Refund: Settle weighs a second refund of one intent
			// before anything else.
			refund, err = dbsqlc.New().RefundLockOfIntentForPaymentIntent(ctx, tx, &dbsqlc.RefundLockOfIntentForPaymentIntentParams{
				StripePaymentIntentID: &sr.PaymentIntent.ID, IntentID: &intentID,
			})
		}
		// Money returned (succeeded) or being returned (pending,
		// requires_action) by a Refund this deployment made; one that
		// failed or was canceled returned nothing.
		returned := sr.Status != stripe.RefundStatusFailed && sr.Status != stripe.RefundStatusCanceled
		if errors.Is(err, db.ErrNotFound) && intentID != "" && returned {
			// Made by this deployment for an intent no refund here
			// records any more (a failover or a restore lost it, with
			// its key, or with its payment): money returned that no
			// refund shows.
			how := "returned"
			if sr.Status != stripe.RefundStatusSucceeded {
				how = "being returned"
			}
			return "", phases.Alarm("Refund %s of intent %s is %s for %d, and no refund here records it: "+
				"money %s for a refund that was lost", sr.ID, intentID, sr.Status, sr.Amount, how)
		}
		if errors.Is(err, db.ErrNotFound) {
			return "no refund here was made for Refund " + sr.ID, nil
		} else if err != nil {
			return "", fmt.Errorf("error locking refund: %w", err)
		}
		return h.Refunds.Settle(ctx, tx, refund, &sr, time.Unix(event.Created, 0))
	case stripe.EventTypeChargeDisputeCreated:
		var dispute stripe.Dispute
		if err := json.Unmarshal(event.Data.Raw, &dispute); err != nil {
			return "", fmt.Errorf("error decoding Dispute: %w", err)
		}
		if dispute.PaymentIntent == nil {
			return "the dispute names no PaymentIntent", nil
		}
		_, err := dbsqlc.New().PaymentMarkDisputed(ctx, tx, &dbsqlc.PaymentMarkDisputedParams{
			StripePaymentIntentID: &dispute.PaymentIntent.ID, DisputedAt: ptr(time.Unix(event.Created, 0)), DisputeID: dispute.ID,
		})
		if errors.Is(err, db.ErrNotFound) {
			return "no payment here was made for PaymentIntent " + dispute.PaymentIntent.ID, nil
		}
		return "", err
	}
	return "paymentsd does not handle " + string(event.Type), nil
}

// foreign says why an object is not this deployment's, or "". Objects
// without paymentsd metadata (made in the dashboard, say) are looked up by
// their Stripe id all the same.
func (h *Handler) foreign(metadata map[string]string) string {
	if ns, ok := metadata[intent.MetadataNamespace]; ok && ns != h.Namespace.String() {
		return "another deployment's object (namespace " + ns + ")"
	}
	return ""
}

// objectID is the id of the event's object, for the record.
func objectID(event *stripe.Event) *string {
	if event.Data == nil {
		return nil
	}
	var obj struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(event.Data.Raw, &obj) != nil || obj.ID == "" {
		return nil
	}
	return &obj.ID
}

// Serve answers a delivery: 400 invalid-signature for an unverified one
// (nothing recorded), 200 for every verified one, applied, ignored or a
// duplicate; 503 when the store fails, so Stripe retries.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, writeProblem func(error)) {
	event, err := h.Read(r)
	if err != nil {
		writeProblem(err)
		return
	}
	// Stripe's delivery must not be cut short by its own timeout halfway:
	// the transaction commits or rolls back whole either way.
	res, err := h.Apply(r.Context(), event)
	if err != nil {
		writeProblem(err)
		return
	}
	if res.Alarm != "" {
		// What an operator must look at: the event contradicts what is
		// recorded (money taken that is recorded as not taken, say).
		zerolog.Ctx(r.Context()).Warn().Str("event_id", event.ID).Str("event_type", string(event.Type)).
			Str("alarm", res.Alarm).Msg("stripe event contradicts what is recorded: not applied")
	} else {
		log := zerolog.Ctx(r.Context()).Info().Str("event_id", event.ID).Str("event_type", string(event.Type))
		if res.Duplicate {
			log = log.Bool("duplicate", true)
		}
		if res.Ignored != "" {
			log = log.Str("ignored", res.Ignored)
		}
		log.Msg("stripe event received")
	}
	w.Header().Set("Content-Type", "application/json")
	body, _ := json.Marshal(map[string]any{"received": true, "duplicate": res.Duplicate, "ignored": nonEmpty(res.Ignored), "alarm": res.Alarm != ""})
	_, _ = w.Write(append(body, '\n'))
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func ptr[T any](v T) *T { return &v }
