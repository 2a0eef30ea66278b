-- name: PaymentInsert :one
INSERT INTO payments (
    user_id, idempotency_key_id, amount, currency, payment_method, description
) VALUES (
    @user_id, @idempotency_key_id, @amount, @currency, @payment_method, @description
)
RETURNING *;

-- name: PaymentGetByIdempotencyKeyID :one
SELECT *
FROM payments
WHERE idempotency_key_id = @idempotency_key_id;

-- PaymentGetByIDForUser scopes the lookup to the owner: another user's payment
-- is indistinguishable from a missing one.
-- name: PaymentGetByIDForUser :one
SELECT *
FROM payments
WHERE id = @id
  AND user_id = @user_id;

-- name: PaymentRecordOutcome :one
UPDATE payments
SET status                   = @status,
    stripe_payment_intent_id = @stripe_payment_intent_id,
    failure_code             = @failure_code,
    failure_message          = @failure_message,
    updated_at               = now()
WHERE id = @id
RETURNING *;
