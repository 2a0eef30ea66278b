package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
	"github.com/paymentsd/paymentsd/internal/ids"
)

// KeyRow is an idempotency key as the harness reads it back.
type KeyRow struct {
	ID            int64
	UserID        int64
	Key           string
	RecoveryPoint string
	ResponseCode  *int32
	ResponseBody  []byte
	Runs          int32
	LockedBy      *string
	LockedAt      *time.Time
	LastRunAt     time.Time
	CreatedAt     time.Time
	FinishedAt    *time.Time
	// NeedsAttention is set for a key parked for an operator, and
	// LastError says why.
	NeedsAttention *time.Time
	LastError      *string
}

// RefundRow is a refund as the harness reads it back.
type RefundRow struct {
	ID int64
	// PublicID is the id the API shows (re_…).
	PublicID       string
	PaymentID      int64
	KeyID          *int64
	Amount         int64
	Status         string
	StripeRefundID *string
}

// PaymentRow is a payment as the harness reads it back.
type PaymentRow struct {
	ID int64
	// PublicID is the id the API shows (pay_…).
	PublicID        string
	UserID          int64
	KeyID           *int64
	Amount          int64
	Currency        string
	PaymentMethod   string
	Status          string
	PaymentIntentID *string
	// AmountRefunded and AmountReserved are what succeeded refunds gave
	// back and what refunds that did not fail take.
	AmountRefunded, AmountReserved int64
	// CaptureMethod is automatic or manual; AmountCaptured is what was
	// captured (the amount of a charged automatic payment).
	CaptureMethod  string
	AmountCaptured int64
}

// UserKey names an idempotency key: it is unique per user.
type UserKey struct {
	UserID int64
	Key    string
}

// Snapshot is the state the invariants are checked against: the service's
// tables and the emulator's PaymentIntents, read after the drain.
type Snapshot struct {
	// Namespace is the deployment's: with a key it names an intent at
	// Stripe.
	Namespace uuid.UUID
	Keys      map[UserKey][]*KeyRow
	Payments  map[int64]*PaymentRow
	// PaymentsByPublicID are the same payments by the id the API shows.
	PaymentsByPublicID map[string]*PaymentRow
	PaymentsOf         map[int64][]*PaymentRow // by idempotency key id
	Receipts           map[int64]int           // receipts per payment id
	Outbox             map[int64]int           // receipts still in the outbox, with their failed attempts, per payment id
	Intents            []stripefake.PaymentIntent
	// Refunds are the refund rows by id, RefundsOf by their key's id, and
	// StripeRefunds the emulator's.
	Refunds       map[int64]*RefundRow
	RefundsOf     map[int64]*RefundRow
	StripeRefunds []stripefake.Refund
	// Service is the state of the serve processes' own machinery.
	Service ServiceRows
}

// ServiceRows is what the serve processes keep in the database besides
// payments: their heartbeats and River's leadership and jobs.
type ServiceRows struct {
	// HeartbeatAge is, per pid of a registered instance, how long ago it
	// last heartbeat.
	HeartbeatAge map[int]time.Duration
	// Leader is River's elected leader, if its term runs.
	Leader string
	// LastFinished is, per job kind, when River last finalized one.
	LastFinished map[string]time.Time
}

// TakeSnapshot reads the snapshot.
func TakeSnapshot(ctx context.Context, pool *pgxpool.Pool, emu *Emulator) (*Snapshot, error) {
	s := &Snapshot{
		Keys: map[UserKey][]*KeyRow{}, Payments: map[int64]*PaymentRow{}, PaymentsOf: map[int64][]*PaymentRow{},
		PaymentsByPublicID: map[string]*PaymentRow{},
		Receipts:           map[int64]int{}, Outbox: map[int64]int{},
		Refunds: map[int64]*RefundRow{}, RefundsOf: map[int64]*RefundRow{},
	}
	if err := pool.QueryRow(ctx, `SELECT namespace FROM deployment`).Scan(&s.Namespace); err != nil {
		return nil, fmt.Errorf("error reading the deployment's namespace: %w", err)
	}
	rows, err := pool.Query(ctx, `SELECT id, user_id, idempotency_key, recovery_point, response_code, response_body,
		runs, locked_by::text, locked_at, last_run_at, created_at, finished_at, needs_attention_at, last_error
		FROM idempotency_keys`)
	if err != nil {
		return nil, fmt.Errorf("error reading idempotency keys: %w", err)
	}
	for rows.Next() {
		k := &KeyRow{}
		if err := rows.Scan(&k.ID, &k.UserID, &k.Key, &k.RecoveryPoint, &k.ResponseCode, &k.ResponseBody,
			&k.Runs, &k.LockedBy, &k.LockedAt, &k.LastRunAt, &k.CreatedAt, &k.FinishedAt, &k.NeedsAttention, &k.LastError); err != nil {
			return nil, err
		}
		uk := UserKey{k.UserID, k.Key}
		s.Keys[uk] = append(s.Keys[uk], k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading idempotency keys: %w", err)
	}

	rows, err = pool.Query(ctx, `SELECT id, public_id, user_id, idempotency_key_id, amount, currency, payment_method, status,
		stripe_payment_intent_id, amount_refunded, amount_reserved, capture_method, amount_captured FROM payments`)
	if err != nil {
		return nil, fmt.Errorf("error reading payments: %w", err)
	}
	for rows.Next() {
		p := &PaymentRow{}
		var public uuid.UUID
		if err := rows.Scan(&p.ID, &public, &p.UserID, &p.KeyID, &p.Amount, &p.Currency, &p.PaymentMethod, &p.Status,
			&p.PaymentIntentID, &p.AmountRefunded, &p.AmountReserved, &p.CaptureMethod, &p.AmountCaptured); err != nil {
			return nil, err
		}
		p.PublicID = ids.Format(ids.Payment, public)
		s.Payments[p.ID] = p
		s.PaymentsByPublicID[p.PublicID] = p
		if p.KeyID != nil {
			s.PaymentsOf[*p.KeyID] = append(s.PaymentsOf[*p.KeyID], p)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading payments: %w", err)
	}

	rows, err = pool.Query(ctx, `SELECT payment_id, count(*) FROM receipts GROUP BY payment_id`)
	if err != nil {
		return nil, fmt.Errorf("error reading receipts: %w", err)
	}
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		s.Receipts[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading receipts: %w", err)
	}

	rows, err = pool.Query(ctx, `SELECT payment_id, attempts FROM receipt_outbox`)
	if err != nil {
		return nil, fmt.Errorf("error reading the receipt outbox: %w", err)
	}
	for rows.Next() {
		var id int64
		var attempts int
		if err := rows.Scan(&id, &attempts); err != nil {
			return nil, err
		}
		s.Outbox[id] = attempts
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading the receipt outbox: %w", err)
	}

	rows, err = pool.Query(ctx, `SELECT id, public_id, payment_id, idempotency_key_id, amount, status, stripe_refund_id FROM refunds`)
	if err != nil {
		return nil, fmt.Errorf("error reading refunds: %w", err)
	}
	for rows.Next() {
		r := &RefundRow{}
		var public uuid.UUID
		if err := rows.Scan(&r.ID, &public, &r.PaymentID, &r.KeyID, &r.Amount, &r.Status, &r.StripeRefundID); err != nil {
			return nil, err
		}
		r.PublicID = ids.Format(ids.Refund, public)
		s.Refunds[r.ID] = r
		if r.KeyID != nil {
			s.RefundsOf[*r.KeyID] = r
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("error reading refunds: %w", err)
	}

	if s.Service, err = readServiceRows(ctx, pool); err != nil {
		return nil, err
	}
	if s.Intents, err = emu.PaymentIntents(ctx); err != nil {
		return nil, err
	}
	if s.StripeRefunds, err = emu.Refunds(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func readServiceRows(ctx context.Context, pool *pgxpool.Pool) (ServiceRows, error) {
	sr := ServiceRows{HeartbeatAge: map[int]time.Duration{}, LastFinished: map[string]time.Time{}}
	rows, err := pool.Query(ctx, `SELECT pid, extract(epoch FROM now() - heartbeat_at)::float8 FROM instances`)
	if err != nil {
		return sr, fmt.Errorf("error reading instances: %w", err)
	}
	for rows.Next() {
		var (
			pid int
			age float64
		)
		if err := rows.Scan(&pid, &age); err != nil {
			return sr, err
		}
		sr.HeartbeatAge[pid] = time.Duration(age * float64(time.Second))
	}
	if err := rows.Err(); err != nil {
		return sr, fmt.Errorf("error reading instances: %w", err)
	}
	err = pool.QueryRow(ctx, `SELECT coalesce(max(leader_id), '') FROM river_leader WHERE expires_at > now()`).Scan(&sr.Leader)
	if err != nil {
		return sr, fmt.Errorf("error reading River's leader: %w", err)
	}
	rows, err = pool.Query(ctx, `
		SELECT kind, max(finalized_at) FROM river_job WHERE finalized_at IS NOT NULL GROUP BY kind
		UNION ALL
		SELECT 'receipt', max(delivered_at) FROM receipts HAVING count(*) > 0`)
	if err != nil {
		return sr, fmt.Errorf("error reading River's jobs: %w", err)
	}
	for rows.Next() {
		var (
			kind string
			at   time.Time
		)
		if err := rows.Scan(&kind, &at); err != nil {
			return sr, err
		}
		sr.LastFinished[kind] = at
	}
	return sr, rows.Err()
}
