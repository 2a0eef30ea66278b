-- +goose Up
-- Authorize now, capture later (Stripe's capture_method=manual). A manual
-- payment stops at requires_capture once the card is authorized; a capture
-- moves it to succeeded, a cancel (ours, or Stripe's when the authorization
-- expires) to canceled.
ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check
    CHECK (status IN ('pending', 'requires_capture', 'succeeded', 'failed', 'canceled'));

-- capture_method is how the payment was confirmed at Stripe. amount_captured
-- is what Stripe took (0 until captured; a partial capture releases the
-- rest): refunds may reserve at most that much, not the amount authorized.
-- capture_key_id is the capture or cancel key that claimed the payment under
-- its row lock, so a second key is refused instead of reaching Stripe; it
-- outlives a reaped key as NULL, by then the payment is no longer
-- requires_capture. capture_attempt numbers the Stripe key of the claim's
-- capture or cancel, moved on only once the PaymentIntent, read back, shows
-- the earlier key did nothing. capture_intent names the capture key whose
-- capture Stripe executed (package intent's ID, which every capture sends
-- as the metadata paymentsd_capture_intent and Stripe keeps on the
-- PaymentIntent): NULL until captured, or when captured outside paymentsd
-- (the Dashboard). It outlives the key row and every claim, so a key whose
-- own commits a failover lost is still answered its capture when it
-- retries, and no other key is ever answered it.
ALTER TABLE payments
    ADD COLUMN capture_method  text    NOT NULL DEFAULT 'automatic'
        CONSTRAINT payments_capture_method_check CHECK (capture_method IN ('automatic', 'manual')),
    ADD COLUMN amount_captured bigint  NOT NULL DEFAULT 0,
    ADD COLUMN capture_key_id  bigint  REFERENCES idempotency_keys (id) ON DELETE SET NULL,
    ADD COLUMN capture_attempt integer NOT NULL DEFAULT 1 CONSTRAINT payments_capture_attempt_check CHECK (capture_attempt >= 1),
    ADD COLUMN capture_intent  text;

-- Every payment made before manual capture was automatic: a succeeded one
-- was captured whole when it was charged. Refunds and disputes keep the
-- status succeeded, so that is every payment that was charged.
UPDATE payments SET amount_captured = amount WHERE status = 'succeeded';

ALTER TABLE payments ADD CONSTRAINT payments_amount_captured_check
    CHECK (0 <= amount_captured AND amount_captured <= amount AND amount_reserved <= amount_captured);

-- A capture key's payment, when a run resumes it, and the payments the
-- reaper's key deletes must set free (ON DELETE SET NULL). Partial: a
-- payment that no capture or cancel ever claimed (every automatic one) has
-- no entry, so inserting a payment writes no entry here.
CREATE UNIQUE INDEX payments_capture_key_id_key ON payments (capture_key_id) WHERE capture_key_id IS NOT NULL;

-- +goose Down
DROP INDEX payments_capture_key_id_key;
ALTER TABLE payments DROP CONSTRAINT payments_amount_captured_check;
ALTER TABLE payments
    DROP COLUMN capture_intent,
    DROP COLUMN capture_attempt,
    DROP COLUMN capture_key_id,
    DROP COLUMN amount_captured,
    DROP COLUMN capture_method;
ALTER TABLE payments DROP CONSTRAINT payments_status_check;
ALTER TABLE payments ADD CONSTRAINT payments_status_check CHECK (status IN ('pending', 'succeeded', 'failed'));
