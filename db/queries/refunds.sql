-- PaymentLockForRefund locks the caller's payment for a refund decision and
-- reads what its refunds already take (amount_reserved) of what was
-- captured (amount_captured): the locking read
-- returns the row as the last competing refund committed it. It returns no
-- row for a payment that is not the user's.
-- name: PaymentLockForRefund :one
SELECT id, public_id, amount, currency, status, stripe_payment_intent_id, amount_reserved, amount_captured
FROM payments
WHERE user_id = @user_id
  AND public_id = @public_id
FOR UPDATE;

-- RefundInsert creates the pending refund, reserves its amount on the
-- payment, and audits it, in one statement (the payment is locked).
-- name: RefundInsert :one
WITH reserved AS (
    UPDATE payments AS p
    SET amount_reserved = p.amount_reserved + sqlc.arg(amount),
        updated_at      = now()
    WHERE p.id = sqlc.arg(payment_id)
), refund AS (
    INSERT INTO refunds (user_id, payment_id, payment_public_id, idempotency_key_id, intent_id, amount, currency, reason)
    VALUES (@user_id, @payment_id, @payment_public_id, @idempotency_key_id, @intent_id, @amount, @currency, sqlc.narg(reason))
    RETURNING *
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT r.user_id, 'refund.created', 'refund', r.id,
           jsonb_build_object('payment_id', r.payment_id, 'amount', r.amount, 'idempotency_key_id', r.idempotency_key_id)
    FROM refund AS r
)
SELECT *
FROM refund;

-- name: RefundGetByIdempotencyKeyID :one
SELECT *
FROM refunds
WHERE idempotency_key_id = @idempotency_key_id;

-- RefundGetByStripeRefundID is the refund that records a Stripe Refund, if
-- any (stripe_refund_id is uniquely indexed): an operator offering a Refund
-- another refund records is refused, not failed on the constraint.
-- name: RefundGetByStripeRefundID :one
SELECT *
FROM refunds
WHERE stripe_refund_id = @stripe_refund_id;

-- RefundLockByIdempotencyKeyID locks the refund a key made, as a webhook
-- about it locks it: before the key.
-- name: RefundLockByIdempotencyKeyID :one
SELECT *
FROM refunds
WHERE idempotency_key_id = @idempotency_key_id
FOR UPDATE;

-- RefundGetByPublicIDForUser scopes the lookup to the owner.
-- name: RefundGetByPublicIDForUser :one
SELECT *
FROM refunds
WHERE user_id = @user_id
  AND public_id = @public_id;

-- RefundPublicIDByLegacyID finds a refund made before public ids by the
-- number its stored answers still show.
-- name: RefundPublicIDByLegacyID :one
SELECT public_id
FROM refunds
WHERE user_id = @user_id
  AND legacy_id = @legacy_id;

-- RefundRecordOutcome records what Stripe made of a refund, moves the
-- payment's amounts with it, and audits it: one statement. Money moves by
-- the change of status alone: a refund that succeeds is refunded; one that
-- fails gives back what it reserved (and refunded); one an operator
-- settles as refunded after it was recorded failed reserves its amount
-- again (the caller checks, the payment locked, that it still has room).
-- by_operator records an operator's settling, which overrides what
-- Stripe's events recorded (a refund an event recorded failed, whose
-- intent's second Refund succeeded), but never moves a refund out of
-- succeeded: the money its Refund returned stays counted, whatever the
-- caller offers (no row: the caller checks first and refuses). Save one
-- way: an operator's settling as failed (not refunded) of a refund whose
-- own recorded Refund the caller verified at Stripe failed (or was
-- canceled), no Refund of its intent pending or succeeded, passed as
-- verified_failed_refund_id, which must be the Refund the row records.
-- name: RefundRecordOutcome :one
WITH prev AS (
    SELECT pr.status
    FROM refunds AS pr
    WHERE pr.id = sqlc.arg(id)
), refund AS (
    UPDATE refunds
    SET status           = @status,
        stripe_refund_id = coalesce(sqlc.narg(stripe_refund_id), stripe_refund_id),
        failure_reason   = sqlc.narg(failure_reason),
        updated_at       = now()
    WHERE refunds.id = sqlc.arg(id)
      -- Once Stripe's own word (a webhook) moved the refund, a run's
      -- record is late: no row, and the run stops (its key was finished
      -- too). An operator settles a key parked since, Stripe consulted.
      AND (refunds.status_at IS NULL OR sqlc.arg(by_operator)::boolean)
      AND NOT (sqlc.arg(by_operator)::boolean AND refunds.status = 'succeeded' AND @status <> 'succeeded'
               AND NOT coalesce(@status = 'failed'
                                AND refunds.stripe_refund_id = sqlc.narg(verified_failed_refund_id)::text, false))
    RETURNING *
), payment AS (
    UPDATE payments AS p
    SET amount_refunded = p.amount_refunded
            + CASE WHEN r.status = 'succeeded' AND prev.status <> 'succeeded' THEN r.amount ELSE 0 END
            - CASE WHEN r.status <> 'succeeded' AND prev.status = 'succeeded' THEN r.amount ELSE 0 END,
        amount_reserved = p.amount_reserved
            - CASE WHEN r.status = 'failed' AND prev.status <> 'failed' THEN r.amount ELSE 0 END
            + CASE WHEN r.status <> 'failed' AND prev.status = 'failed' THEN r.amount ELSE 0 END,
        updated_at      = now()
    FROM refund AS r, prev
    WHERE p.id = r.payment_id
      AND r.status IS DISTINCT FROM prev.status
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT r.user_id, 'refund.' || r.status, 'refund', r.id,
           jsonb_strip_nulls(jsonb_build_object('payment_id', r.payment_id, 'amount', r.amount,
               'stripe_refund_id', r.stripe_refund_id, 'failure_reason', r.failure_reason))
    FROM refund AS r
)
SELECT *
FROM refund;

-- RefundMarkAttemptSpent: see PaymentMarkAttemptSpent.
-- name: RefundMarkAttemptSpent :one
UPDATE refunds
SET refund_attempt_spent_at = coalesce(refund_attempt_spent_at, now()),
    updated_at              = now()
WHERE id = @id
  AND refund_attempt = @refund_attempt
RETURNING *;

-- RefundNextAttempt: see PaymentNextAttempt.
-- name: RefundNextAttempt :one
UPDATE refunds
SET refund_attempt          = refund_attempt + 1,
    refund_attempt_spent_at = NULL,
    refund_attempt_at       = now(),
    updated_at              = now()
WHERE id = @id
  AND refund_attempt = @refund_attempt
RETURNING *;

-- RefundListForPayment pages a payment's refunds newest first, older than
-- the cursor (the newest when it is NULL): an index range scan on
-- (payment_id, public_id), so a page costs the same however many there
-- are. It reads limit + 1 rows to tell has_more.
-- name: RefundListForPayment :many
SELECT *
FROM refunds
WHERE payment_id = @payment_id
  AND user_id = @user_id
  AND public_id < coalesce(sqlc.narg(starting_after)::uuid, 'ffffffff-ffff-ffff-ffff-ffffffffffff')
ORDER BY public_id DESC
LIMIT @max_rows;

-- RefundListForPaymentBefore pages the other way, newer than ending_before,
-- oldest first; the caller reverses the page.
-- name: RefundListForPaymentBefore :many
SELECT *
FROM refunds
WHERE payment_id = @payment_id
  AND user_id = @user_id
  AND public_id > @ending_before::uuid
ORDER BY public_id
LIMIT @max_rows;

-- RefundLinkRestoredKey links a refund to its key brought back from its
-- tombstone (IdempotencyKeyRestoreFromTombstone), as PaymentLinkRestoredKey.
-- name: RefundLinkRestoredKey :execrows
UPDATE refunds
SET idempotency_key_id = @idempotency_key_id
WHERE id = @id
  AND idempotency_key_id IS NULL;

-- RefundRecordSecondRefund records that refund's key was handed to an
-- operator for a second Refund of its intent (stripe_refund_id), in status
-- (pending or succeeded), the refund recorded failed then or not: what a
-- later event of that Refund is weighed against (refunds.second_refunds).
-- name: RefundRecordSecondRefund :exec
UPDATE refunds
SET second_refunds = coalesce(second_refunds, '{}'::jsonb)
        || jsonb_build_object(@stripe_refund_id::text,
               jsonb_build_object('status', @status::text, 'refund_failed', @refund_failed::boolean))
WHERE id = @id;
