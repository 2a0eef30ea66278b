-- IdempotencyKeyRenewLease renews a run's lease in the middle of a foreign
-- call, fenced like every write of a run: a flow checkpoints progress of a
-- long call (a new Stripe attempt, say) in the same transaction. Zero rows
-- means the lease was lost.
-- name: IdempotencyKeyRenewLease :execrows
UPDATE idempotency_keys
SET locked_at = now()
WHERE id = @id
  AND lock_token = @lock_token;

-- IdempotencyKeyMarkNeedsAttention parks a leased key for an operator: no run
-- takes it again until it is settled. Zero rows means the lease was lost.
-- name: IdempotencyKeyMarkNeedsAttention :execrows
UPDATE idempotency_keys
SET needs_attention_at = now(),
    last_error         = @last_error,
    lock_token         = NULL,
    locked_by          = NULL,
    locked_at          = NULL
WHERE id = @id
  AND lock_token = @lock_token;

-- IdempotencyKeyLockNeedsAttention locks a key that awaits an operator, for
-- the transaction that settles it.
-- name: IdempotencyKeyLockNeedsAttention :one
SELECT *
FROM idempotency_keys
WHERE id = @id
  AND needs_attention_at IS NOT NULL
FOR UPDATE;

-- IdempotencyKeyFinishSettled stores the answer an operator (or Stripe's own
-- word) settled a needs-attention key with.
-- name: IdempotencyKeyFinishSettled :execrows
UPDATE idempotency_keys
SET recovery_point     = 'finished',
    needs_attention_at = NULL,
    last_run_at        = now(),
    finished_at        = now(),
    response_code      = @response_code,
    response_headers   = @response_headers,
    response_body      = @response_body
WHERE id = @id
  AND needs_attention_at IS NOT NULL;

-- IdempotencyKeyListUnfinished lists unfinished keys, oldest first, for the
-- operator: all of them, or only those awaiting an operator, of one user or
-- of all.
-- name: IdempotencyKeyListUnfinished :many
SELECT id, user_id, idempotency_key, request_method, request_path, recovery_point,
       created_at, last_run_at, runs, needs_attention_at, last_error,
       (lock_token IS NOT NULL)::boolean AS leased
FROM idempotency_keys
WHERE recovery_point <> 'finished'
  AND (NOT sqlc.arg(needs_attention_only)::boolean OR needs_attention_at IS NOT NULL)
  AND (sqlc.narg(user_id)::bigint IS NULL OR user_id = sqlc.narg(user_id))
ORDER BY created_at, id
LIMIT @max_keys;

-- name: DeploymentNamespace :one
SELECT namespace
FROM deployment;

-- IdempotencyKeyFinishFromOutside finishes an unfinished key with the answer
-- that Stripe's own word (a webhook) settled: whatever its lease or its
-- parking. A run still holding the lease then fails its fence and writes
-- nothing. Zero rows: the key was finished already.
-- name: IdempotencyKeyFinishFromOutside :execrows
UPDATE idempotency_keys
SET recovery_point     = 'finished',
    needs_attention_at = NULL,
    lock_token         = NULL,
    locked_by          = NULL,
    locked_at          = NULL,
    last_run_at        = now(),
    finished_at        = now(),
    response_code      = @response_code,
    response_headers   = @response_headers,
    response_body      = @response_body
WHERE id = @id
  AND recovery_point <> 'finished';
