-- StripeEventInsert records a verified event once: no row when it was
-- recorded before (a redelivery, or a concurrent delivery that committed
-- first: the insert waits for it, then does nothing).
-- name: StripeEventInsert :one
INSERT INTO stripe_events (id, type, object_id, stripe_created)
VALUES (@id, @type, sqlc.narg(object_id), @stripe_created)
ON CONFLICT (id) DO NOTHING
RETURNING id;

-- StripeEventRecord says what became of an event, in its transaction.
-- name: StripeEventRecord :exec
UPDATE stripe_events
SET outcome = @outcome,
    reason  = sqlc.narg(reason)
WHERE id = @id;

-- PaymentLockForEvent locks the payment an event is about: by its
-- PaymentIntent, or else the newest one made for the event's intent.
-- name: PaymentLockForEvent :one
SELECT *
FROM payments
WHERE stripe_payment_intent_id = sqlc.narg(stripe_payment_intent_id)
   OR (stripe_payment_intent_id IS NULL AND intent_id = sqlc.narg(intent_id))
ORDER BY (stripe_payment_intent_id IS NOT NULL) DESC, id DESC
LIMIT 1
FOR UPDATE;

-- PaymentMarkDisputed marks the payment of a PaymentIntent disputed, once.
-- name: PaymentMarkDisputed :one
WITH payment AS (
    UPDATE payments
    SET disputed_at = coalesce(disputed_at, @disputed_at),
        updated_at  = now()
    WHERE stripe_payment_intent_id = @stripe_payment_intent_id
    RETURNING *
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT p.user_id, 'payment.disputed', 'payment', p.id, jsonb_build_object('dispute', sqlc.arg(dispute_id)::text)
    FROM payment AS p
)
SELECT id
FROM payment;

-- RefundLockForEvent locks the refund an event is about: by its Stripe
-- Refund, or else the newest one made for the event's intent.
-- name: RefundLockForEvent :one
SELECT *
FROM refunds
WHERE stripe_refund_id = sqlc.narg(stripe_refund_id)
   OR (stripe_refund_id IS NULL AND intent_id = sqlc.narg(intent_id))
ORDER BY (stripe_refund_id IS NOT NULL) DESC, id DESC
LIMIT 1
FOR UPDATE;

-- RefundLockOfIntentForPaymentIntent locks the newest refund of an intent
-- made for the payment of a PaymentIntent, for a Refund event that
-- RefundLockForEvent did not find: a Refund of this deployment's whose
-- intent's refund records another Refund (a second refund of one intent).
-- By the payment (its PaymentIntent is uniquely indexed, its refunds are
-- indexed by payment), as no index holds every refund by its intent (00017).
-- name: RefundLockOfIntentForPaymentIntent :one
SELECT *
FROM refunds
WHERE refunds.payment_id = (SELECT p.id FROM payments AS p WHERE p.stripe_payment_intent_id = @stripe_payment_intent_id)
  AND refunds.intent_id = @intent_id
ORDER BY id DESC
LIMIT 1
FOR UPDATE;

-- RefundTransition moves a refund from the status it has to another, as
-- Stripe did at status_at, and moves the payment's amounts with it: a
-- refund that succeeds is refunded; one that fails gives back what it
-- reserved, and what it refunded if it had succeeded. One statement, with
-- the audit record.
-- name: RefundTransition :one
WITH refund AS (
    UPDATE refunds
    SET status           = @status,
        stripe_refund_id = coalesce(stripe_refund_id, sqlc.narg(stripe_refund_id)),
        failure_reason   = sqlc.narg(failure_reason),
        status_at        = @status_at,
        updated_at       = now()
    WHERE refunds.id = sqlc.arg(id)
      AND refunds.status = sqlc.arg(from_status)
    RETURNING *
), payment AS (
    UPDATE payments AS p
    -- Money moves by the change of status alone: an event that leaves the
    -- status as it was (failed again, say) moves nothing.
    SET amount_refunded = p.amount_refunded
            + CASE WHEN r.status = 'succeeded' AND sqlc.arg(from_status)::text <> 'succeeded' THEN r.amount ELSE 0 END
            - CASE WHEN r.status <> 'succeeded' AND sqlc.arg(from_status)::text = 'succeeded' THEN r.amount ELSE 0 END,
        amount_reserved = p.amount_reserved
            - CASE WHEN r.status = 'failed' AND sqlc.arg(from_status)::text <> 'failed' THEN r.amount ELSE 0 END,
        updated_at      = now()
    FROM refund AS r
    WHERE p.id = r.payment_id
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT r.user_id, 'refund.' || r.status, 'refund', r.id,
           jsonb_strip_nulls(jsonb_build_object('payment_id', r.payment_id, 'amount', r.amount, 'from', sqlc.arg(from_status)::text,
               'stripe_refund_id', r.stripe_refund_id, 'failure_reason', r.failure_reason, 'by', 'webhook'))
    FROM refund AS r
)
SELECT *
FROM refund;

-- PaymentLockDeclinedForIntent locks the newest payment of an intent that
-- was declined with a PaymentIntent of its own, for a succeeded event of
-- another PaymentIntent of that intent that PaymentLockForEvent did not
-- find: money taken for a payment answered "declined".
-- name: PaymentLockDeclinedForIntent :one
SELECT *
FROM payments
WHERE intent_id = @intent_id
  AND status = 'failed'
  AND stripe_payment_intent_id IS NOT NULL
ORDER BY id DESC
LIMIT 1
FOR UPDATE;
