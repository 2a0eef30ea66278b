package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/stripeonce"
)

// The payment flow's own recovery points, between phases.Started and
// phases.Finished.
const (
	PaymentCreated phases.RecoveryPoint = "payment_created"
	ChargeCreated  phases.RecoveryPoint = "charge_created"
)

// Payment statuses. A manual payment (capture_method manual) stops at
// StatusRequiresCapture once authorized, until a capture makes it
// StatusSucceeded or a cancel (or Stripe, when the authorization expires)
// StatusCanceled.
const (
	StatusPending         = "pending"
	StatusRequiresCapture = "requires_capture"
	StatusSucceeded       = "succeeded"
	StatusFailed          = "failed"
	StatusCanceled        = "canceled"
)

// FlowName is the payment flow's name on its keys.
const FlowName = "payment"

// Method and Path are the request the payment flow serves.
const (
	Method = "POST"
	Path   = "/payments"
)

// EnqueueReceipt puts a payment's receipt in the outbox in the transaction
// that finishes its key: the transactional outbox.
type EnqueueReceipt func(ctx context.Context, tx db.Tx, paymentID int64) error

type flow struct {
	pool      *db.Pool
	namespace uuid.UUID
	charger   *Charger
	receipt   EnqueueReceipt
	queries   *dbsqlc.Queries
}

// state is what the payment flow's steps hand each other: the payment as
// last written.
type state struct {
	payment *dbsqlc.Payment
}

// NewFlow returns the payment flow for the phase engine. namespace is the
// deployment's (see package intent).
func NewFlow(pool *db.Pool, namespace uuid.UUID, charger *Charger, receipt EnqueueReceipt) phases.Flow[state] {
	f := &flow{pool: pool, namespace: namespace, charger: charger, receipt: receipt, queries: dbsqlc.New()}
	return phases.Flow[state]{Name: FlowName, Load: f.load, Steps: []phases.Step[state]{
		phases.Local(phases.Started, f.createPayment),
		phases.Foreign(PaymentCreated, f.charge, f.recordCharge),
		phases.Local(ChargeCreated, f.finish),
	}}
}

// load reads back the payment of a key a run resumes.
func (f *flow) load(ctx context.Context, tx db.Tx, run *phases.Run) (state, error) {
	p, err := f.queries.PaymentGetByIdempotencyKeyID(ctx, tx, &run.Key.ID)
	if err != nil {
		return state{}, fmt.Errorf("error loading payment of idempotency key %d: %w", run.Key.ID, err)
	}
	return state{payment: p}, nil
}

// createPayment inserts the pending payment and its audit record.
func (f *flow) createPayment(ctx context.Context, tx db.Tx, run *phases.Run, s *state) (phases.Transition, error) {
	var p Params
	if err := json.Unmarshal(run.Key.RequestParams, &p); err != nil {
		return phases.Transition{}, fmt.Errorf("error decoding stored request: %w", err)
	}
	row, err := f.queries.PaymentInsert(ctx, tx, &dbsqlc.PaymentInsertParams{
		UserID:           run.Key.UserID,
		IdempotencyKeyID: &run.Key.ID,
		IntentID:         ptr(f.intentOf(run.Key).ID()),
		Amount:           p.Amount,
		Currency:         p.Currency,
		PaymentMethod:    p.PaymentMethod,
		Description:      p.Description,
		CaptureMethod:    p.Method(),
	})
	if err != nil {
		return phases.Transition{}, fmt.Errorf("error inserting payment: %w", err)
	}
	// The query's row is a payment row under another name (a CTE's).
	s.payment = (*dbsqlc.Payment)(row)
	return phases.Next(), nil
}

// charge is the flow's one foreign call.
func (f *flow) charge(ctx context.Context, run *phases.Run, s *state) (*Charge, error) {
	payment := s.payment
	return f.charger.Charge(ctx, &ChargeRequest{
		Intent:        f.intentOf(run.Key),
		Amount:        payment.Amount,
		Currency:      payment.Currency,
		PaymentMethod: payment.PaymentMethod,
		Description:   payment.Description,
		CaptureMethod: payment.CaptureMethod,
		State: stripeonce.State{
			KeyCreatedAt: run.Key.CreatedAt,
			Now:          run.Now,
			Attempt:      int(payment.ChargeAttempt),
			AttemptAt:    payment.ChargeAttemptAt,
			SpentAt:      payment.ChargeAttemptSpentAt,
			Progress:     &progress{flow: f, run: run, state: s},
		},
	})
}

// intentOf is the client intent a key stands for.
func (f *flow) intentOf(key *dbsqlc.IdempotencyKey) intent.Intent {
	return intent.Intent{Namespace: f.namespace, UserID: key.UserID, Key: key.IdempotencyKey}
}

// progress records a charge's Stripe attempts on its payment row, fenced by
// the run's lease.
type progress struct {
	flow  *flow
	run   *phases.Run
	state *state
}

func (p *progress) Spent(ctx context.Context, attempt int) (time.Time, error) {
	var spentAt time.Time
	err := p.run.Checkpoint(ctx, func(ctx context.Context, tx db.Tx) error {
		row, err := p.flow.queries.PaymentMarkAttemptSpent(ctx, tx, &dbsqlc.PaymentMarkAttemptSpentParams{
			ID: p.state.payment.ID, ChargeAttempt: int32(attempt),
		})
		if err != nil {
			return fmt.Errorf("error recording spent Stripe attempt: %w", err)
		}
		spentAt, p.state.payment = *row.ChargeAttemptSpentAt, (*dbsqlc.Payment)(row)
		return nil
	})
	return spentAt, err
}

func (p *progress) Next(ctx context.Context, attempt int) (time.Time, error) {
	var at time.Time
	err := p.run.Checkpoint(ctx, func(ctx context.Context, tx db.Tx) error {
		row, err := p.flow.queries.PaymentNextAttempt(ctx, tx, &dbsqlc.PaymentNextAttemptParams{
			ID: p.state.payment.ID, ChargeAttempt: int32(attempt),
		})
		if err != nil {
			return fmt.Errorf("error moving to the next Stripe attempt: %w", err)
		}
		at, p.state.payment = row.ChargeAttemptAt, (*dbsqlc.Payment)(row)
		return nil
	})
	return at, err
}

// recordCharge stores the charge's definite outcome. A success goes on; a
// refusal finishes the key with a problem that is replayed like a success.
func (f *flow) recordCharge(ctx context.Context, tx db.Tx, run *phases.Run, s *state, charge *Charge) (phases.Transition, error) {
	update := &dbsqlc.PaymentRecordOutcomeParams{ID: s.payment.ID, Status: StatusSucceeded, AmountCaptured: charge.AmountCaptured}
	if charge.Authorized {
		update.Status = StatusRequiresCapture
	}
	if charge.PaymentIntentID != "" {
		update.StripePaymentIntentID = &charge.PaymentIntentID
	}
	if !charge.Succeeded {
		update.Status, update.FailureCode, update.FailureMessage = StatusFailed, &charge.Code, &charge.Message
	}
	row, err := f.queries.PaymentRecordOutcome(ctx, tx, update)
	if err != nil {
		return phases.Transition{}, fmt.Errorf("error recording charge: %w", err)
	}
	s.payment = (*dbsqlc.Payment)(row)
	switch {
	case charge.Succeeded:
		return phases.Next(), nil
	case charge.Declined:
		return phases.FinishWith(declinedResponse(s.payment, charge)), nil
	default:
		return phases.FinishWith(rejectedResponse(s.payment, charge)), nil
	}
}

// finish enqueues the receipt and answers with the created payment. A
// manual payment is only authorized: its receipt goes out on capture.
func (f *flow) finish(ctx context.Context, tx db.Tx, run *phases.Run, s *state) (phases.Transition, error) {
	if s.payment.Status == StatusSucceeded {
		if err := f.receipt(ctx, tx, s.payment.ID); err != nil {
			return phases.Transition{}, err
		}
	}
	return phases.FinishWith(createdResponse(s.payment)), nil
}

func ptr[T any](v T) *T { return &v }
