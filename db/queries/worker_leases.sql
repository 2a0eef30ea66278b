-- WorkerLeaseTake takes lease name for holder until ttl_seconds from now,
-- when no one holds it or its holder's lease has expired: one statement, so
-- two takers never both succeed. It affects one row when taken, none when
-- someone else holds it.
-- name: WorkerLeaseTake :execrows
INSERT INTO worker_leases AS l (name, holder, taken_at, expires_at)
VALUES (@name, @holder, now(), now() + make_interval(secs => @ttl_seconds::float8))
ON CONFLICT (name) DO UPDATE
SET holder = excluded.holder, taken_at = excluded.taken_at, expires_at = excluded.expires_at
WHERE l.expires_at < now();

-- WorkerLeaseRenew moves the lease's expiry to ttl_seconds from now, while
-- holder still holds it: none affected when another has taken it (or it was
-- released).
-- name: WorkerLeaseRenew :execrows
UPDATE worker_leases
SET expires_at = now() + make_interval(secs => @ttl_seconds::float8)
WHERE name = @name AND holder = @holder;

-- WorkerLeaseRelease gives the lease up, if holder still holds it.
-- name: WorkerLeaseRelease :execrows
DELETE FROM worker_leases
WHERE name = @name AND holder = @holder;
