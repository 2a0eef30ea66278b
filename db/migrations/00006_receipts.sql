-- +goose Up
-- One receipt per payment: the outbox worker inserts it in the transaction
-- that completes its job, and the unique payment_id makes a retried or
-- crashed delivery unable to write a second one.
CREATE TABLE receipts (
    id           bigserial PRIMARY KEY,
    payment_id   bigint      NOT NULL REFERENCES payments (id),
    user_id      bigint      NOT NULL REFERENCES users (id),
    amount       bigint      NOT NULL,
    currency     text        NOT NULL,
    delivered_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT receipts_payment_id_key UNIQUE (payment_id)
);

-- +goose Down
DROP TABLE receipts;
