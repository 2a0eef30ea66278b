-- IdempotencyKeyGetByUserKey reads what answering for an existing key
-- needs, and no more: every request starts with it, and a replay ends with
-- it. Whether the key is leased or parked, not by whom or why, and no NULL
-- columns: pgx scans these without building a plan by reflection for each
-- (a parked key's reason is read when needed). same_digest says whether
-- the request carries the digest of the one that made the key (false for a
-- key stored without one). The stored headers come as text (empty until
-- the key finishes), which pgx hands over as it is: into json.RawMessage it
-- would decode them to check them, and the replay decodes them anyway.
-- name: IdempotencyKeyGetByUserKey :one
SELECT id, request_fingerprint, recovery_point,
       coalesce(request_digest = sqlc.narg(request_digest), false)::boolean AS same_digest,
       (lock_token IS NOT NULL)::boolean AS leased,
       (needs_attention_at IS NOT NULL)::boolean AS parked,
       coalesce(response_code, 0)::integer AS response_code,
       coalesce(response_headers::text, '')::text AS response_headers, response_body
FROM idempotency_keys
WHERE user_id = @user_id
  AND idempotency_key = @idempotency_key;

-- name: IdempotencyKeyGetByID :one
SELECT *
FROM idempotency_keys
WHERE id = @id;

-- IdempotencyKeyInsert creates a key with a fresh lease. It returns no row
-- when the key exists (or a concurrent insert of it committed first), when
-- the key was used before and reaped (its tombstone refuses it: running it
-- again could charge twice), or when the user already has max_unfinished
-- unfinished keys: a cap on what one tenant can leave in flight, checked in
-- the same statement.
--
-- The key is inserted at recovery_point: where the flow's first local steps,
-- which run in the same transaction, take it when each goes on (the engine's
-- Flow.reserveAt). The common path so has no advance of a key it has just
-- inserted; a transaction that ends elsewhere (a refusal that finishes the
-- key) writes where it ended, and one that fails rolls the key back with
-- its steps' rows.
--
-- The tombstone predicate cannot miss a key being reaped at that moment: the
-- engine reads the key before inserting it, and the reaper deletes a key and
-- writes its tombstone in one statement, so a read that no longer sees the
-- key is followed by an insert whose snapshot sees the tombstone.
--
-- idempotency_key is cast to text where it is inserted: the column would
-- make the parameter a client_key (00035) and the tombstone's comparison a
-- text, and Postgres refuses a parameter of two types.
-- name: IdempotencyKeyInsert :one
INSERT INTO idempotency_keys (
    user_id, idempotency_key, flow, request_method, request_path,
    request_params, request_fingerprint, request_digest, recovery_point, lock_token, locked_by, locked_at
)
SELECT @user_id, @idempotency_key::text, @flow, @request_method, @request_path,
       @request_params, @request_fingerprint, sqlc.narg(request_digest), @recovery_point, @lock_token, sqlc.narg(locked_by), now()
WHERE (
    SELECT count(*)
    FROM (
        SELECT 1
        FROM idempotency_keys
        WHERE user_id = @user_id
          AND finished_at IS NULL
        LIMIT sqlc.arg(max_unfinished)::int
    ) AS unfinished
) < sqlc.arg(max_unfinished)::int
  AND NOT EXISTS (
    SELECT 1
    FROM idempotency_key_tombstones AS t
    WHERE t.user_id = @user_id
      AND t.idempotency_key = @idempotency_key
)
ON CONFLICT (user_id, idempotency_key) DO NOTHING
RETURNING *;

-- IdempotencyKeyExists says why IdempotencyKeyInsert returned no row: the key
-- exists (key_exists), it was reaped and its tombstone is left (the
-- tombstone_ columns, NULL otherwise), or neither: the user is at the cap.
-- name: IdempotencyKeyExists :one
SELECT EXISTS (
           SELECT 1
           FROM idempotency_keys AS k
           WHERE k.user_id = @user_id
             AND k.idempotency_key = @idempotency_key
       ) AS key_exists,
       t.request_fingerprint AS tombstone_fingerprint,
       t.response_code       AS tombstone_response_code,
       t.resource_type       AS tombstone_resource_type,
       t.resource_id         AS tombstone_resource_id,
       t.resource_public_id  AS tombstone_resource_public_id,
       -- A tombstone reaped before its prefix was kept (migration 00031)
       -- was a payment's or a refund's.
       coalesce(t.resource_prefix,
                CASE t.resource_type WHEN 'payment' THEN 'pay' WHEN 'refund' THEN 're' END)
                             AS tombstone_resource_prefix,
       t.finished_at         AS tombstone_finished_at
FROM (VALUES (1)) AS one
LEFT JOIN idempotency_key_tombstones AS t
       ON t.user_id = @user_id
      AND t.idempotency_key = @idempotency_key;

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
        sqlc.arg(lease_seconds)::float8, sqlc.arg(dead_after_seconds)::float8,
        coalesce(sqlc.narg(now)::timestamptz, now()))
RETURNING *;

-- IdempotencyKeyListResumable lists unfinished keys that no live run holds
-- and whose backoff has passed, least recently run first: the completer's
-- batch. The lease is taken per key afterwards, atomically, so listing the
-- same key twice from two processes is harmless. Unfinished is "finished_at
-- IS NULL" (migration 00026), the predicate of the index of unfinished keys
-- (00027, 00034), which it reads whole, leaving the parked keys out: its
-- order is a sort.
-- name: IdempotencyKeyListResumable :many
SELECT k.id
FROM idempotency_keys AS k
WHERE k.finished_at IS NULL
  AND k.needs_attention_at IS NULL
  AND k.last_run_at < coalesce(sqlc.narg(now)::timestamptz, now()) - interval '1 second' * (
        sqlc.arg(min_idle_seconds)::float8
        + least(sqlc.arg(backoff_seconds)::float8 * power(2, least(k.runs - 1, 16)), sqlc.arg(max_backoff_seconds)::float8))
  AND idempotency_key_lease_is_stale(k.lock_token, k.locked_at, k.locked_by,
        sqlc.arg(lease_seconds)::float8, sqlc.arg(dead_after_seconds)::float8,
        coalesce(sqlc.narg(now)::timestamptz, now()))
ORDER BY k.last_run_at
LIMIT @max_keys;

-- IdempotencyKeyReap moves up to max_keys finished keys older than the
-- retention to tombstones, in one statement: each deleted key leaves a
-- tombstone with its fingerprint, its status and what it made, found through
-- the resource's idempotency_key_id (the statement's snapshot still sees it;
-- ON DELETE SET NULL clears it at the statement's end). A flow with another
-- resource table joins it here. Rows another transaction holds are skipped,
-- so the reaper never waits on or blocks the request path. Unfinished keys
-- are never candidates; payments keep their rows. It returns how many keys
-- were reaped.
-- name: IdempotencyKeyReap :execrows
WITH reaped AS (
    DELETE FROM idempotency_keys
    WHERE id IN (
        SELECT id
        FROM idempotency_keys
        WHERE recovery_point = 'finished'
          AND finished_at < now() - make_interval(secs => sqlc.arg(retention_seconds)::float8)
        ORDER BY finished_at
        LIMIT @max_keys
        FOR UPDATE SKIP LOCKED
    )
    RETURNING id, user_id, idempotency_key, request_method, request_path,
              request_fingerprint, response_code, finished_at
)
INSERT INTO idempotency_key_tombstones (
    user_id, idempotency_key, request_method, request_path, request_fingerprint,
    response_code, resource_type, resource_id, resource_public_id, resource_prefix, finished_at
)
SELECT r.user_id, r.idempotency_key, r.request_method, r.request_path, r.request_fingerprint,
       r.response_code,
       CASE WHEN coalesce(p.id, pc.id) IS NOT NULL THEN 'payment' WHEN rf.id IS NOT NULL THEN 'refund' END,
       coalesce(p.id, pc.id, rf.id), coalesce(p.public_id, pc.public_id, rf.public_id),
       -- The prefix of the resource's public id (package ids): a late
       -- retry is told the id the client saw.
       CASE WHEN coalesce(p.id, pc.id) IS NOT NULL THEN 'pay' WHEN rf.id IS NOT NULL THEN 're' END,
       r.finished_at
FROM reaped AS r
LEFT JOIN payments AS p ON p.idempotency_key_id = r.id
-- A capture or cancel key names the payment it claimed.
LEFT JOIN payments AS pc ON pc.capture_key_id = r.id
LEFT JOIN refunds AS rf ON rf.idempotency_key_id = r.id
ON CONFLICT (user_id, idempotency_key) DO UPDATE
SET request_method      = excluded.request_method,
    request_path        = excluded.request_path,
    request_fingerprint = excluded.request_fingerprint,
    response_code       = excluded.response_code,
    resource_type       = excluded.resource_type,
    resource_id         = excluded.resource_id,
    resource_public_id  = excluded.resource_public_id,
    resource_prefix     = excluded.resource_prefix,
    finished_at         = excluded.finished_at,
    reaped_at           = excluded.reaped_at;

-- name: IdempotencyKeyUnfinishedStats :one
SELECT count(*)                                                   AS unfinished,
       coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS oldest_age_seconds,
       count(*) FILTER (WHERE created_at < now() - make_interval(secs => sqlc.arg(reconcile_after_seconds)::float8)) AS awaiting_reconciliation,
       count(*) FILTER (WHERE needs_attention_at IS NOT NULL)    AS needs_attention
FROM idempotency_keys
WHERE finished_at IS NULL;

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
