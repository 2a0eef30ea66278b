-- +goose Up
-- One row per (user, Idempotency-Key): Brandur Leach's shape plus a request
-- fingerprint and a lease token. The row is the state machine of one client
-- intent: recovery_point says which atomic phase comes next, lock_token and
-- locked_at are the lease, and response_* hold the final answer for replays.
CREATE TABLE idempotency_keys (
    id                  bigserial PRIMARY KEY,
    user_id             bigint      NOT NULL REFERENCES users (id),
    idempotency_key     text        NOT NULL CHECK (char_length(idempotency_key) BETWEEN 1 AND 255),
    created_at          timestamptz NOT NULL DEFAULT now(),
    last_run_at         timestamptz NOT NULL DEFAULT now(),

    -- The request, kept so that any process can resume it without the client.
    request_method      text        NOT NULL,
    request_path        text        NOT NULL,
    request_params      jsonb       NOT NULL,
    -- SHA-256 of the RFC 8785 canonical form of method, path and body.
    request_fingerprint bytea       NOT NULL CHECK (octet_length(request_fingerprint) = 32),

    -- Named by the flow (the engine is generic): 'started', the flow's own
    -- points, then 'finished'.
    recovery_point      text        NOT NULL DEFAULT 'started'
        CHECK (recovery_point ~ '^[a-z][a-z_]{0,62}$'),

    -- The lease: a run owns the key while lock_token is its token and
    -- locked_at is younger than the lease length. Every write of a run is
    -- fenced by "WHERE lock_token = <its token>".
    lock_token          uuid,
    locked_at           timestamptz,
    -- The service instance whose run holds the lease (NULL for runs outside
    -- a serving process). A lease whose instance stopped heartbeating is
    -- stale at once, without waiting out the lease length.
    locked_by           uuid,
    -- How many runs took the lease: the completer backs off by it.
    runs                integer     NOT NULL DEFAULT 1,

    -- The stored answer, written once, in the finishing transaction.
    response_code       integer,
    response_headers    jsonb,
    response_body       bytea,
    finished_at         timestamptz,

    CONSTRAINT idempotency_keys_user_id_idempotency_key_key UNIQUE (user_id, idempotency_key),
    CONSTRAINT idempotency_keys_lease_check CHECK ((lock_token IS NULL) = (locked_at IS NULL)),
    CONSTRAINT idempotency_keys_finished_check CHECK (
        (recovery_point = 'finished') = (finished_at IS NOT NULL AND response_code IS NOT NULL AND response_body IS NOT NULL)
    ),
    CONSTRAINT idempotency_keys_finished_unleased_check CHECK (recovery_point <> 'finished' OR lock_token IS NULL)
);

-- The completer's work list: unfinished keys, least recently run first.
CREATE INDEX idempotency_keys_unfinished_idx ON idempotency_keys (last_run_at)
    WHERE recovery_point <> 'finished';

-- The per-user cap on unfinished keys, checked on every insert.
CREATE INDEX idempotency_keys_user_id_unfinished_idx ON idempotency_keys (user_id)
    WHERE recovery_point <> 'finished';

-- The reaper's work list: finished keys by age.
CREATE INDEX idempotency_keys_finished_at_idx ON idempotency_keys (finished_at)
    WHERE recovery_point = 'finished';

-- +goose Down
DROP TABLE idempotency_keys;
