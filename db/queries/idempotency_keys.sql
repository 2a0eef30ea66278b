-- name: IdempotencyKeyGetByUserKey :one
SELECT *
FROM idempotency_keys
WHERE user_id = @user_id
  AND idempotency_key = @idempotency_key;

-- name: IdempotencyKeyGetByID :one
SELECT *
FROM idempotency_keys
WHERE id = @id;

-- IdempotencyKeyInsert creates a key with a fresh lease, or returns no row when
-- the key exists (or a concurrent insert of it committed first).
-- name: IdempotencyKeyInsert :one
INSERT INTO idempotency_keys (
    user_id, idempotency_key, request_method, request_path,
    request_params, request_fingerprint, lock_token, locked_at
) VALUES (
    @user_id, @idempotency_key, @request_method, @request_path,
    @request_params, @request_fingerprint, @lock_token, now()
)
ON CONFLICT (user_id, idempotency_key) DO NOTHING
RETURNING *;

-- IdempotencyKeyLease takes the lease of an unfinished key whose lease is free
-- or older than the lease length. One statement, so two takers cannot both win:
-- the second re-evaluates the WHERE clause against the first one's row.
-- name: IdempotencyKeyLease :one
UPDATE idempotency_keys
SET lock_token  = @lock_token,
    locked_at   = now(),
    last_run_at = now()
WHERE id = @id
  AND recovery_point <> 'finished'
  AND (lock_token IS NULL OR locked_at < now() - make_interval(secs => @lease_seconds::float8))
RETURNING *;

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
    locked_at        = NULL,
    last_run_at      = now(),
    finished_at      = now(),
    response_code    = @response_code,
    response_headers = @response_headers,
    response_body    = @response_body
WHERE id = @id
  AND lock_token = @lock_token;

-- IdempotencyKeyRelease frees a lease without moving the recovery point, so the
-- next retry resumes at once. Zero rows means the lease was already lost.
-- name: IdempotencyKeyRelease :execrows
UPDATE idempotency_keys
SET lock_token = NULL,
    locked_at  = NULL
WHERE id = @id
  AND lock_token = @lock_token;
