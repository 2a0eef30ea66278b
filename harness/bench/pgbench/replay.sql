-- The SQL ceiling of a replay: the one indexed lookup of a finished key by
-- (user, key), statement for statement the bare service's replay read
-- (harness/bench/bare: keep the two in step); the service's own lookup
-- (IdempotencyKeyGetByUserKey in db/queries) reads a few more columns of the
-- same row. Every lookup hits a key the benchmark finished beforehand
-- through the service.
--
-- Variables (pgbench -D): umin, umax = the range of user ids; nkeys = the
-- number of keys per user, named replay-0 … replay-<nkeys-1>.
\set u random(:umin, :umax)
\set i random(0, :nkeys - 1)
SELECT recovery_point, response_code, response_headers, response_body
FROM idempotency_keys WHERE user_id = :u AND idempotency_key = 'replay-' || :i;
