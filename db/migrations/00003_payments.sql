-- +goose Up
CREATE TABLE payments (
    id                       bigserial PRIMARY KEY,
    user_id                  bigint      NOT NULL REFERENCES users (id),
    -- Kept when the finished key is reaped: the payment outlives its key.
    idempotency_key_id       bigint      REFERENCES idempotency_keys (id) ON DELETE SET NULL,
    amount                   bigint      NOT NULL CHECK (amount BETWEEN 1 AND 99999999),
    currency                 text        NOT NULL CHECK (currency ~ '^[a-z]{3}$'),
    payment_method           text        NOT NULL CHECK (char_length(payment_method) BETWEEN 1 AND 255),
    description              text        CHECK (char_length(description) <= 1000),
    status                   text        NOT NULL DEFAULT 'pending'
        CHECK (status IN ('pending', 'succeeded', 'failed')),
    stripe_payment_intent_id text,
    failure_code             text,
    failure_message          text,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),

    -- One payment per client intent, and one PaymentIntent per payment.
    CONSTRAINT payments_idempotency_key_id_key UNIQUE (idempotency_key_id),
    CONSTRAINT payments_stripe_payment_intent_id_key UNIQUE (stripe_payment_intent_id)
);

-- GET /payments/{id} is scoped to its owner: (id, user_id) is answered by the
-- primary key; this index serves per-user listings and the tenant shard key.
CREATE INDEX payments_user_id_created_at_idx ON payments (user_id, created_at);

-- +goose Down
DROP TABLE payments;
