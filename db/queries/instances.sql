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
-- oid, and returns since when the database's history may have been lost
-- and when that was seen (the Unix epoch for both when never). A loss is
-- the first time either differs from what was recorded (a promotion, a
-- restore); it is dated no later than it happened: when the old identity
-- was last confirmed (a value the restore or the promotion brought back
-- with the old history's rows), less a minute for the servers' clocks.
-- It writes when they changed, and otherwise when the confirmation is 30 s
-- old: one small UPDATE every 30 s, whatever the number of instances (the
-- others' find it fresh once they get the row).
-- name: DeploymentObserveHistory :one
WITH seen AS (
    SELECT timeline, database_oid FROM paymentsd_history_seen()
), observed AS (
    UPDATE deployment AS d
    SET history_lost_at      = CASE WHEN (d.timeline, d.database_oid) IS NOT DISTINCT FROM (s.timeline, s.database_oid)
                                      OR (d.timeline IS NULL AND d.database_oid IS NULL)
                                    THEN d.history_lost_at
                                    ELSE coalesce(d.history_confirmed_at - interval '1 minute', now()) END,
        history_loss_seen_at = CASE WHEN (d.timeline, d.database_oid) IS NOT DISTINCT FROM (s.timeline, s.database_oid)
                                      OR (d.timeline IS NULL AND d.database_oid IS NULL)
                                    THEN d.history_loss_seen_at
                                    ELSE now() END,
        history_confirmed_at = now(),
        timeline             = s.timeline,
        database_oid         = s.database_oid
    FROM seen AS s
    WHERE d.timeline IS DISTINCT FROM s.timeline
       OR d.database_oid IS DISTINCT FROM s.database_oid
       OR d.history_confirmed_at IS NULL
       OR d.history_confirmed_at < now() - interval '30 seconds'
    RETURNING d.history_lost_at, d.history_loss_seen_at
), latest AS (
    SELECT history_lost_at, history_loss_seen_at FROM observed
    UNION ALL
    SELECT history_lost_at, history_loss_seen_at FROM deployment WHERE NOT EXISTS (SELECT FROM observed)
)
SELECT coalesce((SELECT history_lost_at FROM latest), 'epoch'::timestamptz)::timestamptz AS history_lost_at,
       coalesce((SELECT history_loss_seen_at FROM latest), 'epoch'::timestamptz)::timestamptz AS history_loss_seen_at;
