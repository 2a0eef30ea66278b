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
