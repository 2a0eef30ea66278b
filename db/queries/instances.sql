-- name: InstanceRegister :exec
INSERT INTO instances (id, hostname, pid)
VALUES (@id, @hostname, @pid);

-- name: InstanceHeartbeat :execrows
UPDATE instances
SET heartbeat_at = now()
WHERE id = @id;

-- name: InstanceDelete :exec
DELETE FROM instances
WHERE id = @id;

-- InstanceDeleteStale forgets instances silent for longer than max_age. Their
-- leases stay stale: a lease whose instance is missing counts as dead.
-- name: InstanceDeleteStale :execrows
DELETE FROM instances
WHERE heartbeat_at < now() - make_interval(secs => @max_age_seconds::float8);

-- DeploymentObserveHistory records the server's timeline and the database's
-- oid, and returns since when the database's history may have been lost:
-- the first time either differs from what was recorded (a promotion, a
-- restore); the Unix epoch when never. It writes only when they changed.
-- name: DeploymentObserveHistory :one
WITH seen AS (
    SELECT timeline, database_oid FROM paymentsd_history_seen()
), changed AS (
    UPDATE deployment AS d
    SET history_lost_at = CASE WHEN d.timeline IS NULL AND d.database_oid IS NULL THEN d.history_lost_at ELSE now() END,
        timeline        = s.timeline,
        database_oid    = s.database_oid
    FROM seen AS s
    WHERE d.timeline IS DISTINCT FROM s.timeline
       OR d.database_oid IS DISTINCT FROM s.database_oid
    RETURNING d.history_lost_at
)
SELECT coalesce((SELECT history_lost_at FROM changed), (SELECT history_lost_at FROM deployment),
                'epoch'::timestamptz)::timestamptz AS history_lost_at;
