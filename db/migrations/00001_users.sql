-- +goose Up
-- A user owns API keys, idempotency keys and payments. API keys are stored only
-- as a SHA-256 hash: they are 256-bit random values, so a fast hash is enough and
-- lets the bearer lookup be a single unique-index probe.
CREATE TABLE users (
    id           bigserial PRIMARY KEY,
    email        text        NOT NULL CHECK (char_length(email) BETWEEN 3 AND 320),
    api_key_hash bytea       NOT NULL CHECK (octet_length(api_key_hash) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_email_key UNIQUE (email),
    CONSTRAINT users_api_key_hash_key UNIQUE (api_key_hash)
);

-- +goose Down
DROP TABLE users;
