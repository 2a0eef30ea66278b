-- PaymentLockForCapture locks the caller's payment for a capture or cancel
-- decision: the locking read returns the row as the last competing capture,
-- cancel or event committed it. No row for a payment not the user's.
-- name: PaymentLockForCapture :one
SELECT *
FROM payments
WHERE user_id = @user_id
  AND public_id = @public_id
FOR UPDATE;

-- PaymentClaimForCapture claims the locked payment for one capture or
-- cancel key: a later key finds it claimed and is refused, so one payment
-- reaches Stripe under one key. The key's Stripe keys count from 1: an
-- earlier claim released by an operator spent its own.
-- name: PaymentClaimForCapture :one
UPDATE payments
SET capture_key_id  = @capture_key_id,
    capture_attempt = 1,
    updated_at      = now()
WHERE id = @id
  AND capture_key_id IS NULL
RETURNING *;

-- PaymentGetByCaptureKeyID is the payment a capture or cancel key claimed.
-- name: PaymentGetByCaptureKeyID :one
SELECT *
FROM payments
WHERE capture_key_id = @capture_key_id;

-- PaymentNextCaptureAttempt moves the claim to the next Stripe key once
-- the PaymentIntent, read back, shows the current one did nothing.
-- name: PaymentNextCaptureAttempt :one
UPDATE payments
SET capture_attempt = capture_attempt + 1,
    updated_at      = now()
WHERE id = @id
  AND capture_attempt = @capture_attempt
RETURNING *;

-- PaymentRecordCapture records what became of an authorization (captured:
-- succeeded with what was taken, and the intent whose capture it was, NULL
-- for one made outside paymentsd; or canceled) and audits it, in one
-- statement. Only an authorization moves: a payment already captured or
-- canceled (by an event that came first) returns no row.
-- name: PaymentRecordCapture :one
WITH payment AS (
    UPDATE payments
    SET status          = @status,
        amount_captured = @amount_captured,
        capture_intent  = sqlc.narg(capture_intent),
        updated_at      = now()
    WHERE payments.id = sqlc.arg(id)
      AND payments.status = 'requires_capture'
    RETURNING *
), audit AS (
    INSERT INTO audit_records (user_id, action, resource_type, resource_id, data)
    SELECT p.user_id, CASE p.status WHEN 'succeeded' THEN 'payment.captured' ELSE 'payment.' || p.status END,
           'payment', p.id,
           jsonb_strip_nulls(jsonb_build_object(
               'status', p.status,
               'amount_captured', p.amount_captured,
               'capture_key_id', p.capture_key_id,
               'capture_intent', p.capture_intent,
               'by', sqlc.arg(by)::text))
    FROM payment AS p
)
SELECT *
FROM payment;

-- PaymentReleaseCapture frees an authorization an operator found its
-- claiming key never captured nor canceled, so another key may.
-- name: PaymentReleaseCapture :one
UPDATE payments
SET capture_key_id = NULL,
    updated_at     = now()
WHERE id = @id
  AND capture_key_id = @capture_key_id
  AND status = 'requires_capture'
RETURNING *;
