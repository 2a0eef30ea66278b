-- +goose NO TRANSACTION
-- +goose Up
-- The intent indexes hold only the rows that need them. A webhook finds
-- its payment (refund) by the Stripe id, and by the intent only when that
-- id was never recorded (PaymentLockForEvent, RefundLockForEvent: "or
-- stripe_payment_intent_id IS NULL AND intent_id = …"), so an entry for a
-- row whose Stripe id is known is never read.
--
-- Before: every payment put its intent, a hash, at a random page of an
-- index that grows with all of history (702 MiB at 10 million payments),
-- twice (its insert, and the update that records the PaymentIntent, which
-- changes an indexed column and so is not HOT). Past the cache that is a
-- page read per payment; after every checkpoint, a whole page into the WAL
-- the first time each is written.
--
-- Now: a row enters the index while its Stripe id is unknown and leaves it
-- when the id is recorded (the updated row no longer matches the predicate).
-- What is live there are the rows in flight, those whose Stripe call never
-- answered, and those Stripe refused before making a PaymentIntent (an
-- invalid_request_error: recorded as failed, with no id). The entries of
-- the rows that left stay, dead, until the table's next vacuum (bitmap
-- scans, which the lookups are, never mark them), so the index holds about
-- the payments since the last vacuum: it is bounded by autovacuum (a fifth
-- of the table), not by history, and its emptied space is reused, where the
-- old index grew with every payment ever made.
--
-- CONCURRENTLY: building them must not stop payments on a large table. A
-- concurrent build that is interrupted leaves an invalid index behind and
-- this migration unrecorded. So a run drops a new index first only when it
-- is invalid (a plain DROP, the table's lock held for an instant and never
-- queued behind traffic for long, lock_timeout; DROP INDEX CONCURRENTLY
-- cannot run in a DO block), builds what is missing, and drops the old
-- indexes only once both new ones are built: a run interrupted after that
-- keeps its valid new indexes (00016 drops its new index unconditionally,
-- so a run of it interrupted late rebuilds one that was valid, the lookup
-- it serves falling back meanwhile).
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('payments_intent_id_unresolved_idx') AND NOT indisvalid) THEN
        DROP INDEX payments_intent_id_unresolved_idx;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('refunds_intent_id_unresolved_idx') AND NOT indisvalid) THEN
        DROP INDEX refunds_intent_id_unresolved_idx;
    END IF;
END $$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS payments_intent_id_unresolved_idx
    ON payments (intent_id)
    WHERE stripe_payment_intent_id IS NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS refunds_intent_id_unresolved_idx
    ON refunds (intent_id)
    WHERE stripe_refund_id IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS payments_intent_id_idx;
DROP INDEX CONCURRENTLY IF EXISTS refunds_intent_id_idx;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS payments_intent_id_idx;
CREATE INDEX CONCURRENTLY payments_intent_id_idx ON payments (intent_id);
DROP INDEX CONCURRENTLY IF EXISTS refunds_intent_id_idx;
CREATE INDEX CONCURRENTLY refunds_intent_id_idx ON refunds (intent_id);
DROP INDEX CONCURRENTLY IF EXISTS refunds_intent_id_unresolved_idx;
DROP INDEX CONCURRENTLY IF EXISTS payments_intent_id_unresolved_idx;
