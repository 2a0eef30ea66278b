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
-- Now: a row enters the index while its outcome is unknown and leaves it
-- when its Stripe id is recorded (the updated row no longer matches the
-- predicate; vacuum removes the dead entry). What stays are the payments
-- and refunds whose Stripe call never answered and the few in flight: an
-- index of a few pages, which stays in the cache.
--
-- CONCURRENTLY, each new index dropped before it is built, and the old
-- ones dropped once both are built, as in 00016.
DROP INDEX CONCURRENTLY IF EXISTS payments_intent_id_unresolved_idx;
CREATE INDEX CONCURRENTLY payments_intent_id_unresolved_idx
    ON payments (intent_id)
    WHERE stripe_payment_intent_id IS NULL;
DROP INDEX CONCURRENTLY IF EXISTS refunds_intent_id_unresolved_idx;
CREATE INDEX CONCURRENTLY refunds_intent_id_unresolved_idx
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
