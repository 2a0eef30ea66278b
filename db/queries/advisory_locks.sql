-- AdvisoryLock takes the session-level advisory lock key, waiting while
-- another session holds it. The session keeps it until AdvisoryUnlock, or
-- until the session ends.
-- name: AdvisoryLock :exec
SELECT pg_advisory_lock(sqlc.arg(key)::bigint);

-- AdvisoryUnlock releases the session-level advisory lock key: false when
-- this session did not hold it.
-- name: AdvisoryUnlock :one
SELECT pg_advisory_unlock(sqlc.arg(key)::bigint) AS released;
