-- +goose NO TRANSACTION
-- +goose Up
-- The indexes of unfinished keys, one per reader, so that the cap on a
-- user's unfinished keys, checked in every reservation, reads only that
-- user's entries.
--
-- Before: the cap's subquery (user_id = $1 AND unfinished) could use either
-- partial index at the same estimated cost, and Postgres took the
-- completer's (last_run_at): every reservation walked every user's entries,
-- and the per-user index went unused. Each payment leaves two dead entries
-- in a partial index of unfinished keys (its insert and its first phase's
-- update; the finish leaves the predicate), which only a vacuum removes from
-- pages no insert visits again. On a large table autovacuum comes rarely
-- (at 20% of its rows changed), so those dead entries piled up ahead of
-- every scan: with 10 million keys a reservation read 250 to 1,300 index
-- pages, and fresh payments ran at 56% of the bare service's rate.
--
-- Now the cap has an index of its own: user_id, then the lease token. The
-- token is random, so new entries land anywhere in the user's range, not at
-- its end, and reuse pages whose entries have died (Postgres removes a
-- page's dead entries before it splits it) rather than leaving them in
-- front of the next scan. The completer's index covers only the keys it
-- can resume (not those parked for an operator), a predicate the cap's
-- subquery does not imply, so the planner cannot take it for the cap.
-- CONCURRENTLY: building them must not stop reservations on a large table.
-- A concurrent build that is interrupted leaves an invalid index behind and
-- this migration unrecorded; each new index is dropped before it is built,
-- so the next run builds it again rather than taking the invalid one for
-- done, and the old indexes go only once both new ones are built.
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_user_id_lock_token_unfinished_idx;
CREATE INDEX CONCURRENTLY idempotency_keys_user_id_lock_token_unfinished_idx
    ON idempotency_keys (user_id, lock_token)
    WHERE recovery_point <> 'finished';
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_resumable_idx;
CREATE INDEX CONCURRENTLY idempotency_keys_resumable_idx
    ON idempotency_keys (last_run_at)
    WHERE recovery_point <> 'finished' AND needs_attention_at IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_user_id_unfinished_idx;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_unfinished_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_unfinished_idx;
CREATE INDEX CONCURRENTLY idempotency_keys_unfinished_idx
    ON idempotency_keys (last_run_at)
    WHERE recovery_point <> 'finished';
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_user_id_unfinished_idx;
CREATE INDEX CONCURRENTLY idempotency_keys_user_id_unfinished_idx
    ON idempotency_keys (user_id)
    WHERE recovery_point <> 'finished';
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_resumable_idx;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_keys_user_id_lock_token_unfinished_idx;
