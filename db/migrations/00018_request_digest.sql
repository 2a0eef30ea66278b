-- +goose Up
-- A key keeps the digest of the request that made it as its client sent it:
-- the first 128 bits of the SHA-256 of method, path as sent and raw body
-- (idempotency.Digest). A retry that sends the very same request, which is
-- what clients and Stripe's own libraries do, is then known by one
-- comparison in the key's read: it is answered without its body being
-- decoded, canonicalized and fingerprinted.
--
-- It only ever shortens the check. A request with another digest (the same
-- request written another way, or another request) is judged by the
-- fingerprint, as before, and so is every key made before this column: it
-- is NULL there, and NULL equals nothing. So the column needs no backfill,
-- and no CHECK either: a digest that matches nothing costs the full check.
--
-- A nullable column without a default: adding it rewrites nothing, however
-- large the table. It still takes the table's ACCESS EXCLUSIVE lock for an
-- instant, and while it waits for that lock behind a long transaction every
-- key read would queue behind it: lock_timeout gives up instead, and the
-- migration is run again.
--
-- The binaries before this column read and write keys without it, so they
-- may run beside it. Down is for after the binaries that read it are gone:
-- it breaks their every request.
SET LOCAL lock_timeout = '5s';
ALTER TABLE idempotency_keys ADD COLUMN request_digest bytea;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE idempotency_keys DROP COLUMN request_digest;
