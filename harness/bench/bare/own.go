package bare

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
)

// ownSQL is the service's own SQL: harness/bench/pgbench/fresh.sql and
// replay.sql, statement for statement, on the service's schema.
type ownSQL struct{}

// Its statements, in the order a payment runs them; fresh.sql builds the
// stored answer in SQL where this passes it as a parameter.
const (
	// The replay: the one indexed read (harness/bench/pgbench/replay.sql).
	readKey = `SELECT recovery_point, response_code, response_headers, response_body
FROM idempotency_keys WHERE user_id = $1 AND idempotency_key = $2`

	// Transaction 1: reserve the key with a lease at payment_created, the
	// point this transaction reaches, then create the pending payment and
	// its audit record.
	insertKey = `INSERT INTO idempotency_keys (user_id, idempotency_key, flow, request_method, request_path,
    request_params, request_fingerprint, recovery_point, lock_token, locked_by, locked_at)
VALUES ($1, $2::text, 'payment', 'POST', '/payments', $3, sha256($2::text::bytea), 'payment_created', gen_random_uuid(), NULL, now())
ON CONFLICT (user_id, idempotency_key) DO NOTHING
RETURNING id, lock_token`
	insertPayment = `WITH payment AS (
    INSERT INTO payments (user_id, idempotency_key_id, intent_id, amount, currency, payment_method, description, capture_method)
    VALUES ($1, $2, $3, $4, $5, $6, $7, 'automatic')
    RETURNING *
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT p.user_id, 'payment.created', 'payment', p.id,
           jsonb_build_object('status', p.status, 'idempotency_key_id', p.idempotency_key_id)
    FROM payment AS p
)
SELECT id, public_id, created_at FROM payment`

	// Transaction 2: record the PaymentIntent and audit it, enqueue the
	// receipt, finish the key with the answer and release the lease.
	recordPayment = `WITH payment AS (
    UPDATE payments
    SET status = 'succeeded', stripe_payment_intent_id = $2,
        failure_code = NULL, failure_message = NULL, amount_captured = amount, updated_at = now()
    WHERE payments.id = $1
    RETURNING *
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT p.user_id, 'payment.' || p.status, 'payment', p.id,
           jsonb_strip_nulls(jsonb_build_object('status', p.status,
               'stripe_payment_intent_id', p.stripe_payment_intent_id,
               'failure_code', p.failure_code, 'idempotency_key_id', p.idempotency_key_id))
    FROM payment AS p
)
SELECT id FROM payment`
	// Due in a hundred years: the dispatcher of the service running beside
	// must not deliver the bare's receipts.
	enqueueReceipt = `INSERT INTO receipt_outbox (payment_id, run_at) VALUES ($1, now() + interval '100 years')
ON CONFLICT (payment_id) DO NOTHING`
	finishKey = `UPDATE idempotency_keys
SET recovery_point = 'finished', lock_token = NULL, locked_by = NULL, locked_at = NULL,
    last_run_at = now(), finished_at = now(), response_code = 201, response_headers = $3, response_body = $4
WHERE id = $1 AND lock_token = $2`
)

func (ownSQL) replayRead() string { return readKey }

// reserve inserts the key with a lease at payment_created, then the
// payment and its audit record, as the service's first phase transaction
// does.
func (ownSQL) reserve(ctx context.Context, tx pgx.Tx, r *request) (reserved, error) {
	var res reserved
	if err := tx.QueryRow(ctx, insertKey, r.user, r.key, string(r.raw)).Scan(&res.keyID, &res.token); err != nil {
		return res, err // pgx.ErrNoRows: the key exists
	}
	err := tx.QueryRow(ctx, insertPayment, r.user, res.keyID, r.in.ID(), r.p.Amount, r.p.Currency, r.p.PaymentMethod, r.p.Description).
		Scan(&res.paymentID, &res.publicID, &res.created)
	return res, err
}

// finish records the outcome and its audit record, enqueues the receipt
// and finishes the key with the answer, as the service's last phase
// transaction does.
func (ownSQL) finish(ctx context.Context, tx pgx.Tx, res reserved, pi string, headers json.RawMessage, body []byte) error {
	_, err := tx.Exec(ctx, recordPayment, res.paymentID, pi)
	if err == nil {
		_, err = tx.Exec(ctx, enqueueReceipt, res.paymentID)
	}
	if err == nil {
		_, err = tx.Exec(ctx, finishKey, res.keyID, res.token, headers, body)
	}
	return err
}
