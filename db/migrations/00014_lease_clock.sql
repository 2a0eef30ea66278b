-- +goose Up
-- The one definition of a stale lease, judged at a given time: the
-- database's now() in production; a test hands a later time instead of
-- sleeping until a lease runs out (a clock seam, as River's queries have).
-- +goose StatementBegin
CREATE FUNCTION idempotency_key_lease_is_stale(
    lock_token uuid, locked_at timestamptz, locked_by uuid,
    lease_seconds float8, dead_after_seconds float8, at timestamptz
) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT lock_token IS NULL
        OR locked_at < at - make_interval(secs => lease_seconds)
        OR (locked_by IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM instances AS i
            WHERE i.id = locked_by
              AND i.heartbeat_at > at - make_interval(secs => dead_after_seconds)))
$$;
-- +goose StatementEnd
DROP FUNCTION idempotency_key_lease_is_stale(uuid, timestamptz, uuid, float8, float8);

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION idempotency_key_lease_is_stale(
    lock_token uuid, locked_at timestamptz, locked_by uuid,
    lease_seconds float8, dead_after_seconds float8
) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT idempotency_key_lease_is_stale(lock_token, locked_at, locked_by, lease_seconds, dead_after_seconds, now())
$$;
-- +goose StatementEnd
DROP FUNCTION idempotency_key_lease_is_stale(uuid, timestamptz, uuid, float8, float8, timestamptz);
