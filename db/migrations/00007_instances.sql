-- +goose Up
-- Every serving process registers here and heartbeats. A lease held by an
-- instance that stopped heartbeating (killed, partitioned) is stale at once,
-- so the completer need not wait out the lease length after a crash; the
-- lease token still fences the instance should it come back.
CREATE TABLE instances (
    id           uuid        PRIMARY KEY,
    hostname     text        NOT NULL,
    pid          integer     NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX instances_heartbeat_at_idx ON instances (heartbeat_at);

-- The one definition of a stale lease, used wherever a lease may be taken
-- over: free, older than the lease length, or held by an instance that has
-- not heartbeaten within dead_after_seconds (or was forgotten).
-- +goose StatementBegin
CREATE FUNCTION idempotency_key_lease_is_stale(
    lock_token uuid, locked_at timestamptz, locked_by uuid,
    lease_seconds float8, dead_after_seconds float8
) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT lock_token IS NULL
        OR locked_at < now() - make_interval(secs => lease_seconds)
        OR (locked_by IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM instances AS i
            WHERE i.id = locked_by
              AND i.heartbeat_at > now() - make_interval(secs => dead_after_seconds)))
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION idempotency_key_lease_is_stale(uuid, timestamptz, uuid, float8, float8);
DROP TABLE instances;
