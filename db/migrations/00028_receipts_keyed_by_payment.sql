-- +goose NO TRANSACTION
-- +goose Up
-- A receipt is keyed by its payment. Its own serial id was read by nothing,
-- and its primary key index cost every payment one more index entry beside
-- the unique payment_id that already names it (issue 29: the database's
-- evidence per payment). The new key's index is built concurrently (an
-- interrupted build is dropped and built again), then it replaces both
-- constraints in one short statement; dropping the column rewrites nothing.
-- Each statement may run again after a crash before goose recorded it.
DROP INDEX CONCURRENTLY IF EXISTS receipts_payment_id_pkey;
CREATE UNIQUE INDEX CONCURRENTLY receipts_payment_id_pkey ON receipts (payment_id);
ALTER TABLE receipts
    DROP CONSTRAINT receipts_pkey,
    DROP CONSTRAINT IF EXISTS receipts_payment_id_key,
    ADD CONSTRAINT receipts_pkey PRIMARY KEY USING INDEX receipts_payment_id_pkey,
    DROP COLUMN IF EXISTS id;

-- +goose Down
ALTER TABLE receipts
    ADD COLUMN id bigserial,
    DROP CONSTRAINT receipts_pkey,
    ADD CONSTRAINT receipts_payment_id_key UNIQUE (payment_id);
ALTER TABLE receipts ADD CONSTRAINT receipts_pkey PRIMARY KEY (id);
