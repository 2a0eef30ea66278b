-- IdempotencyKeyTombstoneDeleteExpired deletes up to max_keys tombstones
-- reaped longer than retention ago, oldest first, skipping rows another
-- transaction holds. After it, the key is a new key again.
-- name: IdempotencyKeyTombstoneDeleteExpired :execrows
DELETE FROM idempotency_key_tombstones
WHERE (user_id, idempotency_key) IN (
    SELECT user_id, idempotency_key
    FROM idempotency_key_tombstones
    WHERE reaped_at < now() - make_interval(secs => sqlc.arg(retention_seconds)::float8)
    ORDER BY reaped_at
    LIMIT @max_keys
    FOR UPDATE SKIP LOCKED
);
