-- ReceiptEnqueue puts a succeeded payment's receipt in the outbox, in the
-- transaction that records the success. A payment is enqueued once.
-- name: ReceiptEnqueue :exec
INSERT INTO receipt_outbox (payment_id) VALUES (@payment_id)
ON CONFLICT (payment_id) DO NOTHING;

-- ReceiptOutboxClaim locks up to max_rows receipts due now, oldest first,
-- skipping those another dispatcher holds, with what a delivery needs. A
-- receipt states what was charged: amount_captured, which a partial
-- capture leaves below the amount authorized (for an automatic payment
-- the two are equal).
-- name: ReceiptOutboxClaim :many
SELECT o.payment_id, o.attempts, p.user_id, p.amount_captured AS amount, p.currency,
       EXISTS (SELECT 1 FROM receipts AS r WHERE r.payment_id = o.payment_id) AS recorded
FROM receipt_outbox AS o
JOIN payments AS p ON p.id = o.payment_id
WHERE o.run_at <= now()
ORDER BY o.run_at
LIMIT sqlc.arg(max_rows)::int
FOR UPDATE OF o SKIP LOCKED;

-- ReceiptsRecord records the receipts of the delivered payments and takes
-- them out of the outbox, in one statement, with the amount the delivery
-- stated (amount_captured).
-- name: ReceiptsRecord :exec
WITH done AS (
    DELETE FROM receipt_outbox AS o
    WHERE o.payment_id = ANY (@payment_ids::bigint[])
    RETURNING o.payment_id
)
INSERT INTO receipts (payment_id, user_id, amount, currency)
SELECT p.id, p.user_id, p.amount_captured, p.currency
FROM done JOIN payments AS p ON p.id = done.payment_id
ON CONFLICT (payment_id) DO NOTHING;

-- ReceiptOutboxRetry puts failed deliveries off: the n-th failure waits
-- 2^n seconds, at most an hour.
-- name: ReceiptOutboxRetry :exec
UPDATE receipt_outbox
SET attempts = attempts + 1,
    run_at = now() + make_interval(secs => least(power(2, attempts + 1), 3600)),
    last_error = @last_error
WHERE payment_id = @payment_id;

-- ReceiptOutboxPending counts the receipts not yet delivered.
-- name: ReceiptOutboxPending :one
SELECT count(*) FROM receipt_outbox;
