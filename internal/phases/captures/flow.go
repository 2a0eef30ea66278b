package captures

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
)

// The flows' names on their keys.
const (
	CaptureFlowName = "capture"
	CancelFlowName  = "cancel"
)

// Claimed is both flows' own recovery point: the payment is claimed for the
// key; Stripe comes next.
const Claimed phases.RecoveryPoint = "claimed"

type flow struct {
	action    Action
	namespace uuid.UUID
	stripe    *Stripe
	receipt   payments.EnqueueReceipt
	queries   *dbsqlc.Queries
}

// state is what the decision hands to the Stripe call: the payment as last
// written, claimed for the key.
type state struct {
	payment *dbsqlc.Payment
}

// NewCaptureFlow returns the capture flow for the phase engine. namespace
// is the deployment's (see package intent); receipt enqueues the receipt
// of a captured payment.
func NewCaptureFlow(namespace uuid.UUID, s *Stripe, receipt payments.EnqueueReceipt) phases.Flow[state] {
	return newFlow(Capture, CaptureFlowName, namespace, s, receipt)
}

// NewCancelFlow returns the cancel flow for the phase engine.
func NewCancelFlow(namespace uuid.UUID, s *Stripe, receipt payments.EnqueueReceipt) phases.Flow[state] {
	return newFlow(Cancel, CancelFlowName, namespace, s, receipt)
}

func newFlow(action Action, name string, namespace uuid.UUID, s *Stripe, receipt payments.EnqueueReceipt) phases.Flow[state] {
	f := &flow{action: action, namespace: namespace, stripe: s, receipt: receipt, queries: dbsqlc.New()}
	return phases.Flow[state]{Name: name, Load: f.load, Steps: []phases.Step[state]{
		phases.Local(phases.Started, f.decide),
		phases.Foreign(Claimed, f.call, f.record),
	}}
}

// decide locks the payment, decides, and claims the payment for the key. A
// refusal is stored and replayed like any answer.
func (f *flow) decide(ctx context.Context, tx db.Tx, run *phases.Run, s *state) (phases.Transition, error) {
	p, err := paramsOf(run.Key)
	if err != nil {
		return phases.Transition{}, err
	}
	var payment *dbsqlc.Payment
	publicID, err := p.PaymentID.Resolve(ctx, tx, run.Key.UserID)
	if err == nil {
		payment, err = f.queries.PaymentLockForCapture(ctx, tx, &dbsqlc.PaymentLockForCaptureParams{UserID: run.Key.UserID, PublicID: publicID})
	}
	if err != nil {
		// The API checked the payment before reserving the key, and
		// payments are never deleted.
		return phases.Transition{}, fmt.Errorf("error locking the payment to %s: %w", f.action, err)
	}
	switch {
	case f.action == Capture && capturedBy(payment, f.intentOf(run).ID()):
		// This key's own capture, recorded by another key's read-back or
		// an event after a failover lost the commits that claimed and
		// recorded it: answered as the key's own run would have.
		return phases.FinishWith(okResponse(payment)), nil
	case payment.Status == payments.StatusPending && payment.CaptureMethod == payments.CaptureManual:
		// Its authorization is still being decided: a refusal stored now
		// could contradict it for good. Nothing is stored (a fresh key's
		// reservation rolls back with this step); the client retries.
		return phases.Transition{}, &phases.InProgressError{RetryAfter: time.Second}
	case payment.Status != payments.StatusRequiresCapture:
		return phases.FinishWith(refused(f.action, payment, false)), nil
	case payment.CaptureKeyID != nil:
		return phases.FinishWith(refused(f.action, payment, true)), nil
	case f.action == Capture && p.AmountToCapture != nil && *p.AmountToCapture > payment.Amount:
		return phases.FinishWith(exceedsAuthorization(payment, *p.AmountToCapture)), nil
	case payment.StripePaymentIntentID == nil:
		return phases.Transition{}, fmt.Errorf("authorized payment %d has no PaymentIntent", payment.ID)
	}
	claimed, err := f.queries.PaymentClaimForCapture(ctx, tx, &dbsqlc.PaymentClaimForCaptureParams{ID: payment.ID, CaptureKeyID: &run.Key.ID})
	if err != nil {
		return phases.Transition{}, fmt.Errorf("error claiming payment %d: %w", payment.ID, err)
	}
	s.payment = claimed
	return phases.Next(), nil
}

// call is the flow's one foreign call.
func (f *flow) call(ctx context.Context, run *phases.Run, s *state) (*Outcome, error) {
	p, err := paramsOf(run.Key)
	if err != nil {
		return nil, err
	}
	return f.stripe.Do(ctx, &Request{
		Action:          f.action,
		Intent:          f.intentOf(run),
		PaymentIntentID: *s.payment.StripePaymentIntentID,
		AmountToCapture: p.AmountToCapture,
		Attempt:         int(s.payment.CaptureAttempt),
		Next: func(ctx context.Context, attempt int) error {
			return run.Checkpoint(ctx, func(ctx context.Context, tx db.Tx) error {
				row, err := f.queries.PaymentNextCaptureAttempt(ctx, tx, &dbsqlc.PaymentNextCaptureAttemptParams{
					ID: s.payment.ID, CaptureAttempt: int32(attempt),
				})
				if err != nil {
					return fmt.Errorf("error moving to the next Stripe key: %w", err)
				}
				s.payment = row
				return nil
			})
		},
	})
}

// record stores what became of the authorization and answers.
func (f *flow) record(ctx context.Context, tx db.Tx, run *phases.Run, s *state, out *Outcome) (phases.Transition, error) {
	resp, err := recordOutcome(ctx, tx, f.action, f.intentOf(run).ID(), s.payment, out, f.receipt, string(f.action))
	if errors.Is(err, db.ErrNotFound) {
		// An event recorded the outcome, and finished the key, first.
		return phases.Transition{}, phases.ErrLeaseLost
	} else if err != nil {
		return phases.Transition{}, err
	}
	if capturedOutside(out) {
		// Once the record commits: a record refused by the fence, or
		// retried, alarms once or not at all.
		db.AfterCommit(ctx, func() { alarmOutside(ctx, f.stripe.outside, string(f.action), s.payment, out) })
	}
	return phases.FinishWith(resp), nil
}

// intentOf is the intent of the run's key.
func (f *flow) intentOf(run *phases.Run) intent.Intent {
	return intent.Intent{Namespace: f.namespace, UserID: run.Key.UserID, Key: run.Key.IdempotencyKey}
}

// capturedBy reports whether payment was captured by the capture key whose
// intent ID is keyIntent.
func capturedBy(payment *dbsqlc.Payment, keyIntent string) bool {
	return payment.Status == payments.StatusSucceeded && payment.CaptureIntent != nil && *payment.CaptureIntent == keyIntent
}

// recordOutcome moves an authorized payment to what Stripe made of it, with
// its receipt once captured, and returns what a key of action whose intent
// ID is keyIntent answers: 200 and the payment when it is what the key
// asked for, its stored 400 otherwise (a capture that found the
// authorization expired, say). A capture is what a capture key asked for
// only when it was that key's own (out.CapturedBy): one made by another key,
// or outside paymentsd, took effect all the same and is recorded as Stripe
// says, but this key's request did nothing, so it is refused like any
// capture of a payment no longer authorized. by says who learned it, for
// the audit. db.ErrNotFound means the payment was no longer an
// authorization.
func recordOutcome(ctx context.Context, tx db.Tx, action Action, keyIntent string, payment *dbsqlc.Payment, out *Outcome,
	receipt payments.EnqueueReceipt, by string) (*phases.Response, error) {
	update := &dbsqlc.PaymentRecordCaptureParams{ID: payment.ID, Status: payments.StatusCanceled, By: by}
	if out.Captured {
		update.Status, update.AmountCaptured = payments.StatusSucceeded, out.AmountCaptured
		if out.CapturedBy != "" {
			update.CaptureIntent = &out.CapturedBy
		}
	}
	row, err := dbsqlc.New().PaymentRecordCapture(ctx, tx, update)
	if err != nil {
		return nil, fmt.Errorf("error recording the %s of payment %d: %w", action, payment.ID, err)
	}
	paid := (*dbsqlc.Payment)(row)
	if out.Captured {
		if err := receipt(ctx, tx, paid.ID); err != nil {
			return nil, err
		}
	}
	// A cancel is adopted whoever made it: see Stripe.send.
	if (action == Capture && capturedBy(paid, keyIntent)) || (action == Cancel && out.Canceled) {
		return okResponse(paid), nil
	}
	return refused(action, paid, false), nil
}

// load reads back the payment a key claimed, for a run that resumes it.
func (f *flow) load(ctx context.Context, tx db.Tx, run *phases.Run) (state, error) {
	p, err := f.queries.PaymentGetByCaptureKeyID(ctx, tx, &run.Key.ID)
	if err != nil {
		return state{}, fmt.Errorf("error loading the payment of idempotency key %d: %w", run.Key.ID, err)
	}
	return state{payment: p}, nil
}

// paramsOf decodes the request a key stored.
func paramsOf(key *dbsqlc.IdempotencyKey) (*Params, error) {
	var p Params
	if err := json.Unmarshal(key.RequestParams, &p); err != nil {
		return nil, fmt.Errorf("error decoding stored request: %w", err)
	}
	return &p, nil
}
