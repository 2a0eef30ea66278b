-- +goose Up
-- A tombstone keeps the prefix of the public id of what its key made (pay,
-- re: package ids), beside the id's value, so that a late retry is told
-- the id the client saw without the engine knowing the product's resource
-- types: IdempotencyKeyReap writes it with the resource it finds, and a
-- fork's new resource brings its own prefix there.
--
-- Tombstones reaped before this migration have none. They are not updated
-- here (the table holds 90 days of reaped keys, and rewriting each row
-- would stop the reaper for as long): IdempotencyKeyExists gives them the
-- prefix of their resource_type, which was then 'payment' or 'refund'.
--
-- NOT VALID: the check holds for every row written from now on; the rows
-- already there have NULL, which it allows, and checking them would scan
-- the table under its lock.
SET LOCAL lock_timeout = '5s';
ALTER TABLE idempotency_key_tombstones
    ADD COLUMN resource_prefix text,
    ADD CONSTRAINT idempotency_key_tombstones_resource_prefix_check
        CHECK (resource_prefix ~ '^[a-z][a-z0-9]{0,15}$') NOT VALID;

-- +goose Down
SET LOCAL lock_timeout = '5s';
ALTER TABLE idempotency_key_tombstones DROP COLUMN resource_prefix;
