package chaos

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// forget deletes in's history in one transaction, retried on a deadlock
// with the receipt dispatcher; nil when a key of it is leased or it has no
// key.
func (l *Lost) forget(ctx context.Context, in *Intent) (*LostHistory, error) {
	for try := 0; ; try++ {
		var f *LostHistory
		err := pgx.BeginFunc(ctx, l.Pool, func(tx pgx.Tx) error {
			var err error
			f, err = forgetTx(ctx, tx, in)
			return err
		})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001") && try < 5 {
			continue
		}
		if err != nil || f == nil {
			return nil, err
		}
		f.At = time.Now()
		for _, r := range l.Ledger.Intents() {
			if r.Refund && r.Parent == in && f.refundKeys[r.Key] {
				f.Refunds = append(f.Refunds, r)
			}
		}
		return f, nil
	}
}

// errLeased rolls a transaction back when a key it would delete is leased.
var errLeased = errors.New("leased")

func forgetTx(ctx context.Context, tx pgx.Tx, in *Intent) (*LostHistory, error) {
	f := &LostHistory{Victim: in}
	pattern := in.Key
	if !in.Refund {
		pattern += "-refund-%" // the payment's refund keys go with it
	}
	var ids []int64
	var leased bool
	err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(id), '{}'), coalesce(bool_or(lock_token IS NOT NULL), false)
		FROM (SELECT id, lock_token FROM idempotency_keys
			WHERE user_id = $1 AND (idempotency_key = $2 OR idempotency_key LIKE $3) FOR UPDATE) k`,
		in.User.UserID, in.Key, pattern).Scan(&ids, &leased)
	if err != nil || leased || len(ids) == 0 {
		return nil, err
	}
	if in.Refund {
		return f, forgetRefund(ctx, tx, f, ids[0])
	}
	var payments, refunds []int64
	err = tx.QueryRow(ctx, `SELECT coalesce(array_agg(p.id), '{}'), coalesce(min(p.stripe_payment_intent_id), ''),
			coalesce(bool_or(p.charge_attempt_spent_at IS NOT NULL), false),
			coalesce(bool_or(EXISTS (SELECT 1 FROM receipts r WHERE r.payment_id = p.id)), false)
		FROM payments p WHERE p.idempotency_key_id = ANY($1)`, ids).Scan(&payments, &f.PaymentIntent, &f.Spent, &f.Receipt)
	if err != nil {
		return nil, err
	}
	if len(payments) > 0 {
		f.Payment = payments[0]
	}
	if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(id), '{}') FROM refunds WHERE payment_id = ANY($1)`,
		payments).Scan(&refunds); err != nil {
		return nil, err
	}
	_, err = tx.Exec(ctx, `
		WITH o AS (DELETE FROM receipt_outbox WHERE payment_id = ANY($1)),
		     r AS (DELETE FROM receipts WHERE payment_id = ANY($1)),
		     j AS (DELETE FROM river_job WHERE kind = 'receipt' AND (args->>'payment_id')::bigint = ANY($1)),
		     a AS (DELETE FROM audit_records WHERE resource_type = 'payment' AND resource_id = ANY($1)
		                                        OR resource_type = 'refund' AND resource_id = ANY($2))
		DELETE FROM refunds WHERE id = ANY($2)`, payments, refunds)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM payments WHERE id = ANY($1)`, payments); err != nil {
		return nil, err
	}
	return f, forgetKeys(ctx, tx, f, in.User.UserID, ids)
}

// forgetRefund deletes a refund key, its refund and its audit records, and
// gives the payment back what the refund had reserved and refunded.
func forgetRefund(ctx context.Context, tx pgx.Tx, f *LostHistory, keyID int64) error {
	_, err := tx.Exec(ctx, `
		WITH r AS (DELETE FROM refunds WHERE idempotency_key_id = $1 RETURNING id, payment_id, amount, status),
		     a AS (DELETE FROM audit_records WHERE resource_type = 'refund' AND resource_id IN (SELECT id FROM r))
		UPDATE payments p SET
			amount_reserved = p.amount_reserved - (SELECT coalesce(sum(amount), 0) FROM r WHERE status <> 'failed'),
			amount_refunded = p.amount_refunded - (SELECT coalesce(sum(amount), 0) FROM r WHERE status = 'succeeded')
		WHERE p.id IN (SELECT payment_id FROM r)`, keyID)
	if err != nil {
		return err
	}
	return forgetKeys(ctx, tx, f, f.Victim.User.UserID, []int64{keyID})
}

// forgetKeys deletes the keys (and any tombstone of theirs) and records the
// names of the refund keys among them.
func forgetKeys(ctx context.Context, tx pgx.Tx, f *LostHistory, userID int64, ids []int64) error {
	rows, err := tx.Query(ctx, `DELETE FROM idempotency_keys WHERE id = ANY($1) RETURNING idempotency_key`, ids)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	f.refundKeys = map[string]bool{}
	for _, n := range names {
		if n != f.Victim.Key {
			f.refundKeys[n] = true
		}
	}
	_, err = tx.Exec(ctx, `DELETE FROM idempotency_key_tombstones WHERE user_id = $1 AND idempotency_key = ANY($2)`, userID, names)
	return err
}
