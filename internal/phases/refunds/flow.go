package refunds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/paymentsd/paymentsd/internal/db"
	"github.com/paymentsd/paymentsd/internal/db/dbsqlc"
	"github.com/paymentsd/paymentsd/internal/ids"
	"github.com/paymentsd/paymentsd/internal/intent"
	"github.com/paymentsd/paymentsd/internal/phases"
	"github.com/paymentsd/paymentsd/internal/phases/payments"
	"github.com/paymentsd/paymentsd/internal/stripeonce"
)

// FlowName is the refund flow's name on its keys.
const FlowName = "refund"

// RefundCreated is the refund flow's own recovery point: the refund is
// decided and recorded as pending; Stripe comes next.
const RefundCreated phases.RecoveryPoint = "refund_created"

// Refund statuses: Stripe's.
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

type flow struct {
	pool      *db.Pool
	namespace uuid.UUID
	refunder  *Refunder
	queries   *dbsqlc.Queries
}

// state is what the decision hands to the Stripe call: the refund as last
// written and its payment's PaymentIntent.
type state struct {
	refund          *dbsqlc.Refund
	paymentIntentID string
}

// NewFlow returns the refund flow for the phase engine. namespace is the
// deployment's (see package intent).
func NewFlow(pool *db.Pool, namespace uuid.UUID, refunder *Refunder) phases.Flow[state] {
	f := &flow{pool: pool, namespace: namespace, refunder: refunder, queries: dbsqlc.New()}
	return phases.Flow[state]{Name: FlowName, Load: f.load, Steps: []phases.Step[state]{
		phases.Local(phases.Started, f.decide),
		phases.Foreign(RefundCreated, f.refund, f.record),
	}}
}

// decide locks the payment and decides the refund against what its other
// refunds, in flight or done, already take. A refusal is stored and
// replayed like any answer.
func (f *flow) decide(ctx context.Context, tx db.Tx, run *phases.Run, s *state) (phases.Transition, error) {
	var p Params
	if err := json.Unmarshal(run.Key.RequestParams, &p); err != nil {
		return phases.Transition{}, fmt.Errorf("error decoding stored request: %w", err)
	}
	var payment *dbsqlc.PaymentLockForRefundRow
	publicID, err := p.PaymentID.Resolve(ctx, tx, run.Key.UserID)
	if err == nil {
		payment, err = f.queries.PaymentLockForRefund(ctx, tx, &dbsqlc.PaymentLockForRefundParams{UserID: run.Key.UserID, PublicID: publicID})
	}
	if err != nil {
		// The API checked the payment before reserving the key, and
		// payments are never deleted.
		return phases.Transition{}, fmt.Errorf("error locking the refund's payment: %w", err)
	}
	paymentID := ids.Format(ids.Payment, payment.PublicID)
	switch payment.Status {
	case payments.StatusSucceeded:
	case payments.StatusPending:
		// Its charge is still being decided, or is decided again because
		// a failover lost the commits that recorded it, perhaps after
		// this very key had refunded it at Stripe: a refusal stored now
		// could contradict Stripe for good. Nothing is stored (a fresh
		// key's reservation rolls back with this step); the client
		// retries once the payment is settled.
		return phases.Transition{}, &phases.InProgressError{RetryAfter: time.Second}
	default:
		return phases.FinishWith(notRefundable(paymentID, payment.Status)), nil
	}
	// Only what was captured can be refunded: a partial capture released
	// the rest of the authorization.
	remaining := payment.AmountCaptured - payment.AmountReserved
	amount := remaining
	if p.Amount != nil {
		amount = *p.Amount
	}
	if amount < 1 || amount > remaining {
		return phases.FinishWith(exceedsPayment(paymentID, amount, remaining)), nil
	}
	intentID := f.intentOf(run.Key).ID()
	row, err := f.queries.RefundInsert(ctx, tx, &dbsqlc.RefundInsertParams{
		UserID: run.Key.UserID, PaymentID: payment.ID, PaymentPublicID: payment.PublicID,
		IdempotencyKeyID: &run.Key.ID, IntentID: &intentID,
		Amount: amount, Currency: payment.Currency, Reason: p.Reason,
	})
	if err != nil {
		return phases.Transition{}, fmt.Errorf("error inserting refund: %w", err)
	}
	*s = state{refund: (*dbsqlc.Refund)(row), paymentIntentID: *payment.StripePaymentIntentID}
	return phases.Next(), nil
}

// refund is the flow's one foreign call.
func (f *flow) refund(ctx context.Context, run *phases.Run, s *state) (*Outcome, error) {
	r := s.refund
	return f.refunder.Refund(ctx, &Request{
		Intent:          f.intentOf(run.Key),
		PaymentIntentID: s.paymentIntentID,
		Amount:          r.Amount,
		Currency:        r.Currency,
		Reason:          r.Reason,
		State: stripeonce.State{
			KeyCreatedAt: run.Key.CreatedAt,
			Now:          run.Now,
			Attempt:      int(r.RefundAttempt),
			AttemptAt:    r.RefundAttemptAt,
			SpentAt:      r.RefundAttemptSpentAt,
			Progress:     &progress{flow: f, run: run, st: s},
		},
	})
}

// record stores what Stripe made of the refund; a failed or refused refund
// gives its amount back to the payment.
func (f *flow) record(ctx context.Context, tx db.Tx, run *phases.Run, s *state, out *Outcome) (phases.Transition, error) {
	resp, err := recordOutcome(ctx, tx, s.refund, out, false, nil)
	if errors.Is(err, db.ErrNotFound) {
		// A webhook settled the refund, and finished its key, first.
		return phases.Transition{}, phases.ErrLeaseLost
	} else if err != nil {
		return phases.Transition{}, err
	}
	return phases.FinishWith(resp), nil
}

// recordOutcome records out on refund, moving the payment's amounts with
// it, and returns the answer the refund's key stores: the refund, or the
// refusal. db.ErrNotFound means Stripe's own word moved the refund first,
// unless byOperator: an operator's settling overrides it. verifiedFailed,
// an operator's only, names the refund's own Refund as verified failed at
// Stripe, no Refund of its intent standing: only then may a refund
// recorded succeeded be settled failed (RefundRecordOutcome).
func recordOutcome(ctx context.Context, tx db.Tx, refund *dbsqlc.Refund, out *Outcome, byOperator bool, verifiedFailed *string) (*phases.Response, error) {
	update := &dbsqlc.RefundRecordOutcomeParams{ID: refund.ID, Status: out.Status, ByOperator: byOperator, VerifiedFailedRefundID: verifiedFailed}
	if out.StripeRefundID != "" {
		update.StripeRefundID = &out.StripeRefundID
	}
	if out.FailureReason != "" {
		update.FailureReason = &out.FailureReason
	}
	if out.Rejected {
		update.Status, update.FailureReason = StatusFailed, &out.Code
	}
	row, err := dbsqlc.New().RefundRecordOutcome(ctx, tx, update)
	if err != nil {
		return nil, fmt.Errorf("error recording refund: %w", err)
	}
	if out.Rejected {
		return rejected((*dbsqlc.Refund)(row), out), nil
	}
	return createdResponse((*dbsqlc.Refund)(row)), nil
}

// load reads back the refund of a key a run resumes, and its PaymentIntent.
func (f *flow) load(ctx context.Context, tx db.Tx, run *phases.Run) (state, error) {
	return load(ctx, tx, run.Key.ID)
}

// load reads the refund of key keyID and its PaymentIntent.
func load(ctx context.Context, q dbsqlc.DBTX, keyID int64) (state, error) {
	queries := dbsqlc.New()
	refund, err := queries.RefundGetByIdempotencyKeyID(ctx, q, &keyID)
	if err != nil {
		return state{}, fmt.Errorf("error loading refund of idempotency key %d: %w", keyID, err)
	}
	payment, err := queries.PaymentGetByIDForUser(ctx, q, &dbsqlc.PaymentGetByIDForUserParams{ID: refund.PaymentID, UserID: refund.UserID})
	if err != nil {
		return state{}, fmt.Errorf("error loading payment %d: %w", refund.PaymentID, err)
	}
	if payment.StripePaymentIntentID == nil {
		return state{}, errors.New("a refunded payment has no PaymentIntent")
	}
	return state{refund: refund, paymentIntentID: *payment.StripePaymentIntentID}, nil
}

// progress records a refund's Stripe attempts on its row, fenced by the
// run's lease.
type progress struct {
	flow *flow
	run  *phases.Run
	st   *state
}

func (p *progress) Spent(ctx context.Context, attempt int) (time.Time, error) {
	var spentAt time.Time
	err := p.run.Checkpoint(ctx, func(ctx context.Context, tx db.Tx) error {
		row, err := p.flow.queries.RefundMarkAttemptSpent(ctx, tx, &dbsqlc.RefundMarkAttemptSpentParams{
			ID: p.st.refund.ID, RefundAttempt: int32(attempt),
		})
		if err != nil {
			return fmt.Errorf("error recording spent Stripe attempt: %w", err)
		}
		spentAt, p.st.refund = *row.RefundAttemptSpentAt, (*dbsqlc.Refund)(row)
		return nil
	})
	return spentAt, err
}

func (p *progress) Next(ctx context.Context, attempt int) (time.Time, error) {
	var at time.Time
	err := p.run.Checkpoint(ctx, func(ctx context.Context, tx db.Tx) error {
		row, err := p.flow.queries.RefundNextAttempt(ctx, tx, &dbsqlc.RefundNextAttemptParams{
			ID: p.st.refund.ID, RefundAttempt: int32(attempt),
		})
		if err != nil {
			return fmt.Errorf("error moving to the next Stripe attempt: %w", err)
		}
		p.st.refund, at = row, row.RefundAttemptAt
		return nil
	})
	return at, err
}

// intentOf is the client intent a key stands for.
func (f *flow) intentOf(key *dbsqlc.IdempotencyKey) intent.Intent {
	return intent.Intent{Namespace: f.namespace, UserID: key.UserID, Key: key.IdempotencyKey}
}
