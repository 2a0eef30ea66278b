-- The SQL ceiling of a replay: the one indexed lookup of a finished key by
-- (user, key), as the service makes it before anything else
-- (IdempotencyKeyGetByUserKey in db/queries). Every lookup hits a key the
-- benchmark created beforehand through the service.
--
-- Variables (pgbench -D): umin, umax = the range of user ids; nkeys = the
-- number of keys per user, named replay-0 … replay-<nkeys-1>.
\set u random(:umin, :umax)
\set i random(0, :nkeys - 1)
SELECT * FROM idempotency_keys WHERE user_id = :u AND idempotency_key = 'replay-' || :i;
