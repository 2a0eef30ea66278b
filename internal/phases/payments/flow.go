package payments

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

// Payment statuses.
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
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
type EnqueueReceipt func(ctx context.Context, tx pgx.Tx, paymentID int64) error

type flow struct {
	pool      *pgxpool.Pool
	namespace uuid.UUID
	charger   *Charger
	receipt   EnqueueReceipt
	queries   *dbsqlc.Queries
}

// NewFlow returns the payment flow for the phase engine. namespace is the
// deployment's (see package intent).
func NewFlow(pool *pgxpool.Pool, namespace uuid.UUID, charger *Charger, receipt EnqueueReceipt) phases.Flow {
	f := &flow{pool: pool, namespace: namespace, charger: charger, receipt: receipt, queries: dbsqlc.New()}
	return phases.Flow{Name: FlowName, Steps: map[phases.RecoveryPoint]phases.Step{
		phases.Started: phases.Local(f.createPayment),
		PaymentCreated: phases.Foreign(f.charge, f.recordCharge),
		ChargeCreated:  phases.Local(f.finish),
	}}
}

// createPayment inserts the pending payment and its audit record.
func (f *flow) createPayment(ctx context.Context, tx pgx.Tx, run *phases.Run) (phases.Transition, error) {
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
	})
	if err != nil {
		return phases.Transition{}, fmt.Errorf("error inserting payment: %w", err)
	}
	// The query's row is a payment row under another name (a CTE's).
	phases.Keep(run, (*dbsqlc.Payment)(row))
	return phases.AdvanceTo(PaymentCreated), nil
}

// charge is the flow's one foreign call.
func (f *flow) charge(ctx context.Context, run *phases.Run) (*Charge, error) {
	payment, err := f.payment(ctx, f.pool, run)
	if err != nil {
		return nil, err
	}
	return f.charger.Charge(ctx, &ChargeRequest{
		Intent:        f.intentOf(run.Key),
		Amount:        payment.Amount,
		Currency:      payment.Currency,
		PaymentMethod: payment.PaymentMethod,
		Description:   payment.Description,
		State: stripeonce.State{
			KeyCreatedAt: run.Key.CreatedAt,
			Now:          run.Now,
			Attempt:      int(payment.ChargeAttempt),
			AttemptAt:    payment.ChargeAttemptAt,
			SpentAt:      payment.ChargeAttemptSpentAt,
			Progress:     &progress{flow: f, run: run, paymentID: payment.ID},
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
	flow      *flow
	run       *phases.Run
	paymentID int64
}

func (p *progress) Spent(ctx context.Context, attempt int) (time.Time, error) {
	var spentAt time.Time
	err := p.run.Checkpoint(ctx, func(ctx context.Context, tx pgx.Tx) error {
		row, err := p.flow.queries.PaymentMarkAttemptSpent(ctx, tx, &dbsqlc.PaymentMarkAttemptSpentParams{
			ID: p.paymentID, ChargeAttempt: int32(attempt),
		})
		if err != nil {
			return fmt.Errorf("error recording spent Stripe attempt: %w", db.InterpretError(err))
		}
		spentAt = *row.ChargeAttemptSpentAt
		phases.Keep(p.run, (*dbsqlc.Payment)(row))
		return nil
	})
	return spentAt, err
}

func (p *progress) Next(ctx context.Context, attempt int) (time.Time, error) {
	var at time.Time
	err := p.run.Checkpoint(ctx, func(ctx context.Context, tx pgx.Tx) error {
		row, err := p.flow.queries.PaymentNextAttempt(ctx, tx, &dbsqlc.PaymentNextAttemptParams{
			ID: p.paymentID, ChargeAttempt: int32(attempt),
		})
		if err != nil {
			return fmt.Errorf("error moving to the next Stripe attempt: %w", db.InterpretError(err))
		}
		at = row.ChargeAttemptAt
		phases.Keep(p.run, (*dbsqlc.Payment)(row))
		return nil
	})
	return at, err
}

// recordCharge stores the charge's definite outcome. A success moves on; a
// refusal finishes the key with a problem that is replayed like a success.
func (f *flow) recordCharge(ctx context.Context, tx pgx.Tx, run *phases.Run, charge *Charge) (phases.Transition, error) {
	payment, err := f.payment(ctx, tx, run)
	if err != nil {
		return phases.Transition{}, err
	}
	update := &dbsqlc.PaymentRecordOutcomeParams{ID: payment.ID, Status: StatusSucceeded}
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
	payment = (*dbsqlc.Payment)(row)
	phases.Keep(run, payment)
	switch {
	case charge.Succeeded:
		return phases.AdvanceTo(ChargeCreated), nil
	case charge.Declined:
		return phases.FinishWith(declinedResponse(payment, charge)), nil
	default:
		return phases.FinishWith(rejectedResponse(payment, charge)), nil
	}
}

// finish enqueues the receipt and answers with the created payment.
func (f *flow) finish(ctx context.Context, tx pgx.Tx, run *phases.Run) (phases.Transition, error) {
	payment, err := f.payment(ctx, tx, run)
	if err != nil {
		return phases.Transition{}, err
	}
	if err := f.receipt(ctx, tx, payment.ID); err != nil {
		return phases.Transition{}, err
	}
	return phases.FinishWith(createdResponse(payment)), nil
}

// payment is the run's payment: handed over by an earlier step of the same
// run, or read back when the run resumed a key.
func (f *flow) payment(ctx context.Context, dbtx dbsqlc.DBTX, run *phases.Run) (*dbsqlc.Payment, error) {
	if p, ok := phases.Kept[*dbsqlc.Payment](run); ok {
		return p, nil
	}
	p, err := f.queries.PaymentGetByIdempotencyKeyID(ctx, dbtx, &run.Key.ID)
	if err != nil {
		return nil, fmt.Errorf("error loading payment of idempotency key %d: %w", run.Key.ID, db.InterpretError(err))
	}
	phases.Keep(run, p)
	return p, nil
}

func ptr[T any](v T) *T { return &v }
