-- +goose Up
-- A refund of (part of) a succeeded payment. Refunds of one payment are
-- decided under the payment's row lock, counting those still in flight, so
-- concurrent refunds under different keys can never total more than the
-- payment. Lock order, everywhere: a key row (only its own run locks it),
-- then the payment row, then its refund rows.
CREATE TABLE refunds (
    id                      bigserial PRIMARY KEY,
    user_id                 bigint      NOT NULL REFERENCES users (id),
    payment_id              bigint      NOT NULL REFERENCES payments (id),
    -- Kept when the finished key is reaped: the refund outlives its key.
    idempotency_key_id      bigint      REFERENCES idempotency_keys (id) ON DELETE SET NULL,
    amount                  bigint      NOT NULL CHECK (amount BETWEEN 1 AND 99999999),
    currency                text        NOT NULL CHECK (currency ~ '^[a-z]{3}$'),
    reason                  text        CHECK (reason IN ('duplicate', 'fraudulent', 'requested_by_customer')),
    -- Stripe's refund statuses. A refund is pending from the moment it is
    -- decided until Stripe says otherwise; a failed one gives its amount back.
    status                  text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'succeeded', 'failed')),
    stripe_refund_id        text,
    failure_reason          text,
    -- The Stripe key in use and since when it is spent, as for charges.
    refund_attempt          integer     NOT NULL DEFAULT 1 CHECK (refund_attempt >= 1),
    refund_attempt_spent_at timestamptz,
    refund_attempt_at       timestamptz NOT NULL DEFAULT now(),
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT refunds_idempotency_key_id_key UNIQUE (idempotency_key_id),
    CONSTRAINT refunds_stripe_refund_id_key UNIQUE (stripe_refund_id)
);

-- A payment's refunds, newest first: the over-refund check and the listing.
CREATE INDEX refunds_payment_id_id_idx ON refunds (payment_id, id);

-- What Stripe has refunded of the payment (its succeeded refunds), and what
-- its refunds take (every one that has not failed, those in flight
-- included): kept in step with the refunds under the payment's row lock,
-- and read by the SELECT … FOR UPDATE that decides a refund. A column, not
-- a sum over refunds: a locking read re-reads the locked row once the lock
-- is granted, but a sum over another table would still see the statement's
-- snapshot, from before the competing refund committed.
ALTER TABLE payments
    ADD COLUMN amount_refunded bigint NOT NULL DEFAULT 0,
    ADD COLUMN amount_reserved bigint NOT NULL DEFAULT 0,
    ADD CONSTRAINT payments_amount_refunded_check CHECK (0 <= amount_refunded AND amount_refunded <= amount_reserved AND amount_reserved <= amount);

-- Lists page newest first by id, per user.
CREATE INDEX payments_user_id_id_idx ON payments (user_id, id);

-- +goose Down
DROP INDEX payments_user_id_id_idx;
ALTER TABLE payments DROP CONSTRAINT payments_amount_refunded_check, DROP COLUMN amount_reserved, DROP COLUMN amount_refunded;
DROP TABLE refunds;
