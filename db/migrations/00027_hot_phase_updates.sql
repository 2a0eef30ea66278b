-- +goose NO TRANSACTION
-- +goose Up
-- A phase's update of its key can be HOT: it writes no index entry, only a
-- new row version on the same page. Postgres makes an update HOT when no
-- column it changes is in any index, as a key column or in a partial index's
-- predicate, and the page has room. Until now a payment's key was written
-- three times (its insert, its first phase's advance in the same
-- transaction, its finish) and every index of the table each time: the
-- advance changes recovery_point and last_run_at, which the indexes of
-- unfinished keys had in their predicates and keys, and so was never HOT.
--
-- Now no index names a column the advance changes (recovery_point,
-- locked_at, last_run_at), and each index serves one reader:
--
--   idempotency_keys_cap_idx        (user_id, lock_token) WHERE finished_at IS NULL
--     the cap on a user's unfinished keys, in IdempotencyKeyInsert; the
--     operator's IdempotencyKeyListUnfinished and the gauge's
--     IdempotencyKeyUnfinishedStats. As 00016's, with the predicate on
--     finished_at (00026 makes the two say the same).
--   idempotency_keys_completer_idx  (id) WHERE finished_at IS NULL AND needs_attention_at IS NULL
--     the completer's IdempotencyKeyListResumable: the keys it may resume,
--     keyed by a column no update changes. It was keyed by last_run_at,
--     which every phase moves; the completer orders by last_run_at with a
--     sort of these entries, which its scan read all of before too whenever
--     fewer than a batch were due (the backoff, per key, is no index bound).
--   idempotency_keys_reaper_idx     (finished_at) WHERE finished_at IS NOT NULL
--     the reaper's IdempotencyKeyReap, oldest finish first, as before.
--
-- The finish still writes every index (it changes lock_token and
-- finished_at: it must, for the key to leave the unfinished indexes and
-- enter the reaper's); so does taking or freeing a lease (lock_token).
--
-- A fill factor of 85 leaves room on each page for the row's next version,
-- without which an update is not HOT either. It applies to pages written
-- from now on; the table is not rewritten.
--
-- The audit trail's two secondary indexes, on (resource_type, resource_id)
-- and (user_id, created_at), go: no query of the service reads the trail,
-- and each cost every payment two index entries. An operator's ad hoc look
-- at a resource's trail scans the table, as it would any other question of
-- it; the trail keeps its primary key.
--
-- CONCURRENTLY, as 00016: the builds must not stop reservations on a large
-- table. Each new index is dropped first, so that a build interrupted
-- (leaving an invalid index and this migration unrecorded) is built again
-- on the next run; the old indexes go only once all the new ones are built.
ALTER TABLE idempotency_keys SET (fillfactor = 85);
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_cap_idx;
CREATE INDEX CONCURRENTLY idempotency_keys_cap_idx
    ON idempotency_keys (user_id, lock_token)
    WHERE finished_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_completer_idx;
CREATE INDEX CONCURRENTLY idempotency_keys_completer_idx
    ON idempotency_keys (id)
    WHERE finished_at IS NULL AND needs_attention_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_reaper_idx;
CREATE INDEX CONCURRENTLY idempotency_keys_reaper_idx
    ON idempotency_keys (finished_at)
    WHERE finished_at IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_user_id_lock_token_unfinished_idx;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_resumable_idx;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_finished_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS audit_records_resource_idx;
DROP INDEX CONCURRENTLY IF EXISTS audit_records_user_id_created_at_idx;

-- +goose Down
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_records_user_id_created_at_idx
    ON audit_records (user_id, created_at);
CREATE INDEX CONCURRENTLY IF NOT EXISTS audit_records_resource_idx
    ON audit_records (resource_type, resource_id);
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_finished_at_idx;
CREATE INDEX CONCURRENTLY idempotency_keys_finished_at_idx
    ON idempotency_keys (finished_at)
    WHERE recovery_point = 'finished';
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_resumable_idx;
CREATE INDEX CONCURRENTLY idempotency_keys_resumable_idx
    ON idempotency_keys (last_run_at)
    WHERE recovery_point <> 'finished' AND needs_attention_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_user_id_lock_token_unfinished_idx;
CREATE INDEX CONCURRENTLY idempotency_keys_user_id_lock_token_unfinished_idx
    ON idempotency_keys (user_id, lock_token)
    WHERE recovery_point <> 'finished';
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_reaper_idx;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_completer_idx;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_cap_idx;
ALTER TABLE idempotency_keys RESET (fillfactor);
