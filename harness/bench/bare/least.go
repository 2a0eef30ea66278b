package bare

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"

	"github.com/paymentsd/paymentsd/internal/ids"
)

// leastSQL is the least SQL that does a payment's job, on the least
// schema (harness/bench/least/schema.sql): harness/bench/pgbench/least.sql
// and least_replay.sql, statement for statement. It is a yardstick: the
// service never runs it. Beside ownSQL it differs where the design does,
// not where the engine does: the same two transactions, the same statements
// a transaction, the key inserted at the point its transaction reaches (as
// the service's is), but the payment's public id its only key, the key
// naming its payment, and five indexes in all.
type leastSQL struct{}

// Its statements, in the order a payment runs them; least.sql builds the
// stored answer in SQL where this passes it as a parameter.
const (
	// The replay: the one indexed read (least_replay.sql).
	leastReadKey = `SELECT recovery_point, response_code, response_headers, response_body
FROM leastsql.idempotency_keys WHERE user_id = $1 AND idempotency_key = $2`

	// Transaction 1: reserve the key at the point this transaction
	// reaches, with a lease, naming the payment it makes; then the payment
	// and its audit record. The key's reference to the payment is checked
	// at commit.
	leastInsertKey = `INSERT INTO leastsql.idempotency_keys (user_id, idempotency_key, request_params, recovery_point, locked_at, payment_id)
VALUES ($1, $2, $3, 'payment_created', now(), $4)
ON CONFLICT (user_id, idempotency_key) DO NOTHING
RETURNING id, locked_at`
	leastInsertPayment = `WITH payment AS (
    INSERT INTO leastsql.payments (id, user_id, amount, currency, payment_method, description)
    VALUES ($1, $2, $3, $4, $5, $6)
    RETURNING id, user_id, status, created_at
), audit AS (
    INSERT INTO leastsql.audit_records (user_id, action, resource_type, resource_id, data)
    SELECT user_id, 'payment.created', 'payment', id, jsonb_build_object('status', status)
    FROM payment
)
SELECT created_at FROM payment`

	// Transaction 2: record the outcome and audit it, stage the receipt's
	// job, and finish the key with the answer under the lease it holds.
	leastRecordPayment = `WITH payment AS (
    UPDATE leastsql.payments SET status = 'succeeded', stripe_payment_intent_id = $2
    WHERE id = $1
    RETURNING id, user_id, status, stripe_payment_intent_id
), audit AS (
    INSERT INTO leastsql.audit_records (user_id, action, resource_type, resource_id, data)
    SELECT user_id, 'payment.' || status, 'payment', id,
           jsonb_build_object('status', status, 'stripe_payment_intent_id', stripe_payment_intent_id)
    FROM payment
)
SELECT id FROM payment`
	leastStageJob = `INSERT INTO leastsql.staged_jobs (job_name, job_args)
VALUES ('receipt', jsonb_build_object('payment_id', $1::uuid))`
	leastFinishKey = `UPDATE leastsql.idempotency_keys
SET recovery_point = 'finished', locked_at = NULL, last_run_at = now(),
    response_code = 201, response_headers = $3, response_body = $4
WHERE id = $1 AND locked_at = $2`
)

func (leastSQL) replayRead() string { return leastReadKey }

func (leastSQL) reserve(ctx context.Context, tx pgx.Tx, r *request) (reserved, error) {
	res := reserved{publicID: ids.New()}
	if err := tx.QueryRow(ctx, leastInsertKey, r.user, r.key, string(r.raw), res.publicID).Scan(&res.keyID, &res.lockedAt); err != nil {
		return res, err // pgx.ErrNoRows: the key exists
	}
	err := tx.QueryRow(ctx, leastInsertPayment, res.publicID, r.user, r.p.Amount, r.p.Currency, r.p.PaymentMethod, r.p.Description).
		Scan(&res.created)
	return res, err
}

func (leastSQL) finish(ctx context.Context, tx pgx.Tx, res reserved, pi string, headers json.RawMessage, body []byte) error {
	_, err := tx.Exec(ctx, leastRecordPayment, res.publicID, pi)
	if err == nil {
		_, err = tx.Exec(ctx, leastStageJob, res.publicID)
	}
	if err == nil {
		_, err = tx.Exec(ctx, leastFinishKey, res.keyID, res.lockedAt, headers, body)
	}
	return err
}
