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
-- takes it again until it is settled. kind says whether Stripe's own word may
-- settle it ('unknown_outcome') or only an operator ('conflict'). Zero rows
-- means the lease was lost.
-- name: IdempotencyKeyMarkNeedsAttention :execrows
UPDATE idempotency_keys
SET needs_attention_at   = now(),
    needs_attention_kind = @kind::text,
    last_error           = @last_error,
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
SET recovery_point       = 'finished',
    needs_attention_at   = NULL,
    needs_attention_kind = NULL,
    last_run_at          = now(),
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
WHERE finished_at IS NULL
  AND (NOT sqlc.arg(needs_attention_only)::boolean OR needs_attention_at IS NOT NULL)
  AND (sqlc.narg(user_id)::bigint IS NULL OR user_id = sqlc.narg(user_id))
ORDER BY created_at, id
LIMIT @max_keys;

-- name: DeploymentNamespace :one
SELECT namespace
FROM deployment;

-- IdempotencyKeyFinishFromOutside finishes an unfinished key with the answer
-- that Stripe's own word (a webhook) settled: whatever its lease, and parked
-- or not, unless it was parked for a conflict, which is an operator's alone.
-- A run still holding the lease then fails its fence and writes nothing.
-- Zero rows: the key was finished already, or is an operator's.
-- name: IdempotencyKeyFinishFromOutside :execrows
UPDATE idempotency_keys
SET recovery_point       = 'finished',
    needs_attention_at   = NULL,
    needs_attention_kind = NULL,
    lock_token         = NULL,
    locked_by          = NULL,
    locked_at          = NULL,
    last_run_at        = now(),
    finished_at        = now(),
    response_code      = @response_code,
    response_headers   = @response_headers,
    response_body      = @response_body
WHERE id = @id
  AND recovery_point <> 'finished'
  AND needs_attention_kind IS DISTINCT FROM 'conflict';

-- IdempotencyKeyLockForEvent locks a key that Stripe's event is about to
-- settle, and says whether it is finished and why it awaits an operator, if
-- it does.
-- name: IdempotencyKeyLockForEvent :one
SELECT recovery_point, needs_attention_kind, last_error
FROM idempotency_keys
WHERE id = @id
FOR UPDATE;

-- IdempotencyKeyReopenForOperator hands a finished key back to an operator
-- because Stripe's word contradicts the answer it stored (a payment answered
-- "not charged" whose PaymentIntent succeeded): replays answer 503
-- needs-attention from now on, never the wrong answer, until the operator
-- settles it. point is where its flow's outcome is unknown. Zero rows: it
-- was not finished.
-- name: IdempotencyKeyReopenForOperator :execrows
UPDATE idempotency_keys
SET recovery_point       = @point,
    needs_attention_at   = now(),
    needs_attention_kind = 'conflict',
    last_error           = @last_error,
    finished_at          = NULL,
    response_code        = NULL,
    response_headers     = NULL,
    response_body        = NULL
WHERE id = @id
  AND recovery_point = 'finished';

-- IdempotencyKeyHandOver parks a key for a conflict whatever its state,
-- because Stripe's word contradicts what it answers or would answer: a
-- finished key is reopened at point (as IdempotencyKeyReopenForOperator);
-- an unfinished one keeps its recovery point and loses its lease, so the
-- run holding it fails its fence and writes nothing, and neither its flow,
-- the completer nor an event finishes it. A key that awaited an operator
-- already keeps its earlier reason after the new one, cut to what
-- last_error holds. newly_parked: it did not await an operator before.
-- name: IdempotencyKeyHandOver :one
WITH old AS (
    SELECT o.id, o.recovery_point, o.needs_attention_at, o.last_error
    FROM idempotency_keys AS o
    WHERE o.id = @id
    FOR UPDATE
)
UPDATE idempotency_keys AS k
SET recovery_point       = CASE WHEN old.recovery_point = 'finished' THEN @point::text ELSE old.recovery_point END,
    needs_attention_at   = coalesce(old.needs_attention_at, now()),
    needs_attention_kind = 'conflict',
    last_error           = CASE
        WHEN old.needs_attention_at IS NULL OR old.last_error IS NULL THEN @last_error::text
        ELSE left(@last_error::text || ' | parked before: ' || old.last_error, 1000)
    END,
    lock_token           = NULL,
    locked_by            = NULL,
    locked_at            = NULL,
    finished_at          = NULL,
    response_code        = NULL,
    response_headers     = NULL,
    response_body        = NULL
FROM old
WHERE k.id = old.id
RETURNING (old.needs_attention_at IS NULL)::boolean AS newly_parked;
