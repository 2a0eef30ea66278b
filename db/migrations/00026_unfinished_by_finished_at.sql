-- +goose NO TRANSACTION
-- +goose Up
-- A key is unfinished exactly when it has no finished_at. The finished check
-- of 00002 says that a finished key has one; this says the converse, so that
-- the indexes of unfinished keys can name finished_at in their predicates
-- rather than recovery_point (00027), and the queries that read them say
-- "finished_at IS NULL". Every statement that unfinishes a key (restoring
-- it from its tombstone, reopening it for an operator) already clears
-- finished_at.
--
-- NOT VALID, then VALIDATE in a transaction of its own: adding it holds the
-- table's ACCESS EXCLUSIVE lock for an instant only (lock_timeout gives up
-- rather than queue every key read behind a long transaction); validating
-- reads the table under a lock that lets reads and writes go on. A run
-- interrupted between the two adds nothing the second time and validates.
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    IF NOT EXISTS (SELECT 1 FROM pg_constraint
                   WHERE conrelid = 'idempotency_keys'::regclass
                     AND conname = 'idempotency_keys_unfinished_check') THEN
        ALTER TABLE idempotency_keys
            ADD CONSTRAINT idempotency_keys_unfinished_check
            CHECK ((recovery_point = 'finished') = (finished_at IS NOT NULL)) NOT VALID;
    END IF;
END $$;
-- +goose StatementEnd
ALTER TABLE idempotency_keys VALIDATE CONSTRAINT idempotency_keys_unfinished_check;

-- +goose Down
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_unfinished_check;
