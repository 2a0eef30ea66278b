-- +goose Up
-- What is left of a finished key once the reaper has deleted it: enough to
-- refuse a late retry with the key, rather than run it again (a second
-- charge), and to name what the original request made. The reaper moves a
-- key here in the statement that deletes it (IdempotencyKeyReap) and keeps
-- the tombstone much longer than the key (ReaperConfig.TombstoneRetention,
-- 90 days after reaping by default). It holds no request parameters and no
-- stored response.
CREATE TABLE idempotency_key_tombstones (
    user_id             bigint      NOT NULL REFERENCES users (id),
    idempotency_key     text        NOT NULL CHECK (char_length(idempotency_key) BETWEEN 1 AND 255),
    request_method      text        NOT NULL,
    request_path        text        NOT NULL,
    -- The key's request fingerprint: a retry of the same request is told
    -- apart from the key reused for another one.
    request_fingerprint bytea       NOT NULL CHECK (octet_length(request_fingerprint) = 32),
    -- The status the request was answered with.
    response_code       integer     NOT NULL,
    -- What the request made: the flow's resource ('payment') and its id, or
    -- both NULL when it made nothing.
    resource_type       text        CHECK (resource_type ~ '^[a-z][a-z_]{0,62}$'),
    resource_id         bigint,
    finished_at         timestamptz NOT NULL,
    reaped_at           timestamptz NOT NULL DEFAULT now(),

    PRIMARY KEY (user_id, idempotency_key),
    CONSTRAINT idempotency_key_tombstones_resource_check CHECK ((resource_type IS NULL) = (resource_id IS NULL))
);

-- The reaper's work list: tombstones by age.
CREATE INDEX idempotency_key_tombstones_reaped_at_idx ON idempotency_key_tombstones (reaped_at);

-- +goose Down
DROP TABLE idempotency_key_tombstones;
