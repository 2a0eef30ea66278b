-- name: IdempotencyKeyGetByUserKey :one
SELECT *
FROM idempotency_keys
WHERE user_id = @user_id
  AND idempotency_key = @idempotency_key;

-- name: IdempotencyKeyGetByID :one
SELECT *
FROM idempotency_keys
WHERE id = @id;

-- IdempotencyKeyInsert creates a key with a fresh lease. It returns no row
-- when the key exists (or a concurrent insert of it committed first), or
-- when the user already has max_unfinished unfinished keys: a cap on what one
-- tenant can leave in flight, checked in the same statement.
-- name: IdempotencyKeyInsert :one
INSERT INTO idempotency_keys (
    user_id, idempotency_key, request_method, request_path,
    request_params, request_fingerprint, lock_token, locked_by, locked_at
)
SELECT @user_id, @idempotency_key, @request_method, @request_path,
       @request_params, @request_fingerprint, @lock_token, sqlc.narg(locked_by), now()
WHERE (
    SELECT count(*)
    FROM (
        SELECT 1
        FROM idempotency_keys
        WHERE user_id = @user_id
          AND recovery_point <> 'finished'
        LIMIT sqlc.arg(max_unfinished)::int
    ) AS unfinished
) < sqlc.arg(max_unfinished)::int
ON CONFLICT (user_id, idempotency_key) DO NOTHING
RETURNING *;

-- name: IdempotencyKeyExists :one
SELECT EXISTS (
    SELECT 1
    FROM idempotency_keys
    WHERE user_id = @user_id
      AND idempotency_key = @idempotency_key
);

-- IdempotencyKeyLease takes the lease of an unfinished key whose lease is
-- free, older than the lease length, or held by an instance that stopped
-- heartbeating. One statement, so two takers cannot both win: the second
-- re-evaluates the WHERE clause against the first one's row.
-- name: IdempotencyKeyLease :one
UPDATE idempotency_keys AS k
SET lock_token  = @lock_token,
    locked_by   = @locked_by,
    locked_at   = now(),
    last_run_at = now(),
    runs        = k.runs + 1
WHERE k.id = @id
  AND k.recovery_point <> 'finished'
  AND k.needs_attention_at IS NULL
  AND idempotency_key_lease_is_stale(k.lock_token, k.locked_at, k.locked_by,
        sqlc.arg(lease_seconds)::float8, sqlc.arg(dead_after_seconds)::float8)
RETURNING *;

-- IdempotencyKeyListResumable lists unfinished keys that no live run holds
-- and whose backoff has passed, least recently run first: the completer's
-- batch. The lease is taken per key afterwards, atomically, so listing the
-- same key twice from two processes is harmless.
-- name: IdempotencyKeyListResumable :many
SELECT k.id
FROM idempotency_keys AS k
WHERE k.recovery_point <> 'finished'
  AND k.needs_attention_at IS NULL
  AND k.last_run_at < now() - interval '1 second' * (
        sqlc.arg(min_idle_seconds)::float8
        + least(sqlc.arg(backoff_seconds)::float8 * power(2, least(k.runs - 1, 16)), sqlc.arg(max_backoff_seconds)::float8))
  AND idempotency_key_lease_is_stale(k.lock_token, k.locked_at, k.locked_by,
        sqlc.arg(lease_seconds)::float8, sqlc.arg(dead_after_seconds)::float8)
ORDER BY k.last_run_at
LIMIT @max_keys;

-- IdempotencyKeyDeleteFinished deletes up to max_keys finished keys older
-- than the retention, skipping rows another transaction holds, so the reaper
-- never waits on or blocks the request path. Unfinished keys are never
-- candidates; payments keep their rows (ON DELETE SET NULL).
-- name: IdempotencyKeyDeleteFinished :execrows
DELETE FROM idempotency_keys
WHERE id IN (
    SELECT id
    FROM idempotency_keys
    WHERE recovery_point = 'finished'
      AND finished_at < now() - make_interval(secs => sqlc.arg(retention_seconds)::float8)
    ORDER BY finished_at
    LIMIT @max_keys
    FOR UPDATE SKIP LOCKED
);

-- name: IdempotencyKeyUnfinishedStats :one
SELECT count(*)                                                   AS unfinished,
       coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS oldest_age_seconds,
       count(*) FILTER (WHERE created_at < now() - make_interval(secs => sqlc.arg(reconcile_after_seconds)::float8)) AS awaiting_reconciliation,
       count(*) FILTER (WHERE needs_attention_at IS NOT NULL)    AS needs_attention
FROM idempotency_keys
WHERE recovery_point <> 'finished';

-- IdempotencyKeyAdvance moves a leased key to its next recovery point and
-- renews the lease. Zero rows means the lease was lost.
-- name: IdempotencyKeyAdvance :execrows
UPDATE idempotency_keys
SET recovery_point = @recovery_point,
    locked_at      = now(),
    last_run_at    = now()
WHERE id = @id
  AND lock_token = @lock_token;

-- IdempotencyKeyFinish stores the final response and frees the lease. Zero rows
-- means the lease was lost.
-- name: IdempotencyKeyFinish :execrows
UPDATE idempotency_keys
SET recovery_point   = 'finished',
    lock_token       = NULL,
    locked_by        = NULL,
    locked_at        = NULL,
    last_run_at      = now(),
    finished_at      = now(),
    response_code    = @response_code,
    response_headers = @response_headers,
    response_body    = @response_body
WHERE id = @id
  AND lock_token = @lock_token;

-- IdempotencyKeyRelease frees a lease without moving the recovery point, so the
-- next retry resumes at once, and says why the run ended without an outcome
-- (NULL keeps what was there). Zero rows means the lease was already lost.
-- name: IdempotencyKeyRelease :execrows
UPDATE idempotency_keys
SET lock_token = NULL,
    locked_by  = NULL,
    locked_at  = NULL,
    last_error = coalesce(sqlc.narg(last_error), last_error)
WHERE id = @id
  AND lock_token = @lock_token;
