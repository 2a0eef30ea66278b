-- The SQL ceiling of a replay on the least schema: the one indexed lookup
-- of a finished key by (user, key), statement for statement the replay read
-- of the bare service over the least SQL (harness/bench/bare/least.go: keep
-- the two in step). Every lookup hits a key the benchmark finished
-- beforehand through that bare service.
--
-- Variables (pgbench -D): umin, umax = the range of user ids; nkeys = the
-- number of keys per user, named least-replay-0 … least-replay-<nkeys-1>.
\set u random(:umin, :umax)
\set i random(0, :nkeys - 1)
SELECT recovery_point, response_code, response_headers, response_body
FROM leastsql.idempotency_keys WHERE user_id = :u AND idempotency_key = 'least-replay-' || :i;
