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

-- IdempotencyKeyRestoreFromTombstone brings a reaped key back, in the
-- transaction of the Stripe event that contradicts the answer it gave, as a
-- key parked for an operator ('conflict'): a retry with it answers 503
-- needs-attention instead of the tombstone's 422, `keys list` shows it, and
-- `keys resolve` settles it with an answer the retry then replays. The
-- tombstone is the key's of the resource (resource_type, resource_id) made
-- by request_method and, when given, request_path (a payment's create, not
-- its capture); it goes, so the key is not both live and reaped.
--
-- The request's params were reaped with the key: the key comes back at
-- point, past the flow's first step (the only one that reads them), and a
-- parked key is never run again, only settled. created_at is the resource's
-- (what an operator's lookup window starts from); last_run_at the finish
-- the client was answered at. No row: no such tombstone (expired), or a live
-- key holds its name (IdempotencyKeyHoldingTombstone): no path of the
-- service makes one while the tombstone is there (IdempotencyKeyInsert), but
-- a restored backup or a hand's edit can. Then the tombstone stays: deleted
-- with the insert doing nothing, the reaped key was gone for good.
-- name: IdempotencyKeyRestoreFromTombstone :one
WITH tombstone AS (
    DELETE FROM idempotency_key_tombstones
    WHERE (user_id, idempotency_key) IN (
        SELECT t.user_id, t.idempotency_key
        FROM idempotency_key_tombstones AS t
        WHERE t.resource_type = @resource_type
          AND t.resource_id = @resource_id
          AND t.request_method = @request_method
          AND (sqlc.narg(request_path)::text IS NULL OR t.request_path = sqlc.narg(request_path))
          AND NOT EXISTS (
              SELECT 1
              FROM idempotency_keys AS k
              WHERE k.user_id = t.user_id
                AND k.idempotency_key = t.idempotency_key
          )
        LIMIT 1
        FOR UPDATE
    )
    RETURNING user_id, idempotency_key, request_method, request_path, request_fingerprint, finished_at
)
INSERT INTO idempotency_keys (
    user_id, idempotency_key, flow, request_method, request_path, request_params,
    request_fingerprint, recovery_point, created_at, last_run_at,
    needs_attention_at, needs_attention_kind, last_error
)
SELECT user_id, idempotency_key, @flow, request_method, request_path, '{}'::jsonb,
       request_fingerprint, @point, @created_at, finished_at,
       now(), 'conflict', @last_error
FROM tombstone
ON CONFLICT (user_id, idempotency_key) DO NOTHING
RETURNING id;

-- IdempotencyKeyHoldingTombstone is the live key that holds the name of
-- the tombstone IdempotencyKeyRestoreFromTombstone looks for (the same
-- predicate), when it restored nothing: the key cannot come back under a
-- name in use.
-- name: IdempotencyKeyHoldingTombstone :one
SELECT k.id
FROM idempotency_key_tombstones AS t
JOIN idempotency_keys AS k
  ON k.user_id = t.user_id
 AND k.idempotency_key = t.idempotency_key
WHERE t.resource_type = @resource_type
  AND t.resource_id = @resource_id
  AND t.request_method = @request_method
  AND (sqlc.narg(request_path)::text IS NULL OR t.request_path = sqlc.narg(request_path))
LIMIT 1;
