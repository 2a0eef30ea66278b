-- PaymentInsert creates the pending payment and its audit record in one
-- statement: one round trip inside the phase transaction.
-- name: PaymentInsert :one
WITH payment AS (
    INSERT INTO payments (
        user_id, idempotency_key_id, intent_id, amount, currency, payment_method, description, capture_method
    ) VALUES (
        @user_id, @idempotency_key_id, @intent_id, @amount, @currency, @payment_method, @description, @capture_method
    )
    RETURNING *
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT p.user_id, 'payment.created', 'payment', p.id,
           jsonb_build_object('status', p.status, 'idempotency_key_id', p.idempotency_key_id)
    FROM payment AS p
)
SELECT *
FROM payment;

-- name: PaymentGetByIdempotencyKeyID :one
SELECT *
FROM payments
WHERE idempotency_key_id = @idempotency_key_id;

-- PaymentGetByIDForUser reads a payment by its row id, scoped to the owner.
-- name: PaymentGetByIDForUser :one
SELECT *
FROM payments
WHERE id = @id
  AND user_id = @user_id;

-- PaymentGetByPublicIDForUser scopes the lookup to the owner: another user's
-- payment is indistinguishable from a missing one.
-- name: PaymentGetByPublicIDForUser :one
SELECT *
FROM payments
WHERE user_id = @user_id
  AND public_id = @public_id;

-- PaymentPublicIDByLegacyID finds a payment made before public ids by the
-- number its stored answers still show.
-- name: PaymentPublicIDByLegacyID :one
SELECT public_id
FROM payments
WHERE user_id = @user_id
  AND legacy_id = @legacy_id;

-- PaymentRecordOutcome records the charge's outcome and audits it, in one
-- statement: succeeded with what was captured, requires_capture for a manual
-- payment authorized (0 captured), or failed.
-- name: PaymentRecordOutcome :one
WITH payment AS (
    UPDATE payments
    SET status                   = @status,
        stripe_payment_intent_id = @stripe_payment_intent_id,
        failure_code             = @failure_code,
        failure_message          = @failure_message,
        amount_captured          = @amount_captured,
        updated_at               = now()
    WHERE payments.id = sqlc.arg(id)
    RETURNING *
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT p.user_id, 'payment.' || p.status, 'payment', p.id,
           jsonb_strip_nulls(jsonb_build_object(
               'status', p.status,
               'stripe_payment_intent_id', p.stripe_payment_intent_id,
               'failure_code', p.failure_code,
               'idempotency_key_id', p.idempotency_key_id))
    FROM payment AS p
)
SELECT *
FROM payment;

-- PaymentMarkAttemptSpent records that the charge's current Stripe key
-- answered with a cached server error: later runs look the PaymentIntent up
-- instead of sending that key again.
-- name: PaymentMarkAttemptSpent :one
UPDATE payments
SET charge_attempt_spent_at = coalesce(charge_attempt_spent_at, now()),
    updated_at              = now()
WHERE id = @id
  AND charge_attempt = @charge_attempt
RETURNING *;

-- PaymentNextAttempt moves the charge to the next Stripe key once the spent
-- one is proven to have created nothing.
-- name: PaymentNextAttempt :one
UPDATE payments
SET charge_attempt          = charge_attempt + 1,
    charge_attempt_spent_at = NULL,
    charge_attempt_at       = now(),
    updated_at              = now()
WHERE id = @id
  AND charge_attempt = @charge_attempt
RETURNING *;

-- PaymentListForUser pages the user's payments newest first, older than the
-- cursor (the newest when it is NULL): an index range scan on
-- (user_id, public_id), time-ordered ids. It reads limit + 1 rows to tell
-- has_more.
-- name: PaymentListForUser :many
SELECT *
FROM payments
WHERE user_id = @user_id
  AND public_id < coalesce(sqlc.narg(starting_after)::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff')
ORDER BY public_id DESC
LIMIT @max_rows;

-- PaymentListForUserBefore pages the other way, newer than ending_before,
-- oldest first; the caller reverses the page.
-- name: PaymentListForUserBefore :many
SELECT *
FROM payments
WHERE user_id = @user_id
  AND public_id > @ending_before::uuid
ORDER BY public_id
LIMIT @max_rows;

-- PaymentLinkRestoredKey links a payment to its key brought back from its
-- tombstone (IdempotencyKeyRestoreFromTombstone): the operator's settlement
-- finds the payment by its key. Zero rows: the payment has a key.
-- name: PaymentLinkRestoredKey :execrows
UPDATE payments
SET idempotency_key_id = @idempotency_key_id
WHERE id = @id
  AND idempotency_key_id IS NULL;
