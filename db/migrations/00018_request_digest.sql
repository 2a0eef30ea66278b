-- +goose Up
-- A key keeps the digest of the request that made it as its client sent it:
-- the first 128 bits of the SHA-256 of method, path and body, byte for byte
-- (idempotency.Digest). A retry that sends the very same bytes, which is
-- what clients and Stripe's own libraries do, is then known by one
-- comparison in the key's read: it is answered without its body being
-- decoded, canonicalized and fingerprinted.
--
-- It only ever shortens the check. A request with another digest (the same
-- request written another way, or another request) is judged by the
-- fingerprint, as before, and so is every key made before this column: it
-- is NULL there, and NULL equals nothing. So the column needs no backfill,
-- and no CHECK either: a digest that matches nothing costs the full check,
-- never a wrong answer.
--
-- A nullable column without a default: adding it rewrites nothing, however
-- large the table.
ALTER TABLE idempotency_keys ADD COLUMN request_digest bytea;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN request_digest;
