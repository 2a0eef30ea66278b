-- +goose NO TRANSACTION
-- +goose Up
-- Two rare lookups of a Stripe event that contradicts an answer given, each
-- inside the webhook's transaction, so neither may scan a large table.
--
-- A tombstone by what its key made. A Stripe event that contradicts the
-- answer a reaped key gave (a payment answered "not charged" whose
-- PaymentIntent succeeded, a refund answered "not refunded" whose Refund did)
-- brings that key back from its tombstone for an operator
-- (IdempotencyKeyRestoreFromTombstone). The event knows the payment or
-- refund, never the client's key (its intent id is a one-way hash of it),
-- and without this index the lookup would scan 90 days of tombstones inside
-- the webhook's transaction, holding the payment's lock. Rare to read,
-- written once per reaped key that made something.
--
-- A declined payment by its intent. It records its declined PaymentIntent,
-- so the unresolved intent index (00017) no longer holds it; when another
-- PaymentIntent of its intent succeeds (a lost attempt, the dashboard), the
-- customer told "declined" was charged, and the event must find the payment
-- to hand its key to an operator (PaymentLockDeclinedForIntent). Only
-- failed rows with a PaymentIntent enter: the decline's update already
-- writes every index (it sets the uniquely indexed PaymentIntent), so this
-- adds one entry per decline, not per payment.
--
-- CONCURRENTLY: payments and the reaper write these tables all day. A build that was
-- interrupted leaves an invalid index that IF NOT EXISTS would keep: drop it
-- first (a plain DROP: cannot run CONCURRENTLY in a DO block; lock_timeout
-- keeps it from queueing behind the reaper for long).
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('idempotency_key_tombstones_resource_idx') AND NOT indisvalid) THEN
        DROP INDEX idempotency_key_tombstones_resource_idx;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('payments_intent_id_declined_idx') AND NOT indisvalid) THEN
        DROP INDEX payments_intent_id_declined_idx;
    END IF;
END $$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS idempotency_key_tombstones_resource_idx
    ON idempotency_key_tombstones (resource_type, resource_id)
    WHERE resource_type IS NOT NULL;
CREATE INDEX CONCURRENTLY IF NOT EXISTS payments_intent_id_declined_idx
    ON payments (intent_id)
    WHERE status = 'failed' AND stripe_payment_intent_id IS NOT NULL;

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS payments_intent_id_declined_idx;
DROP INDEX CONCURRENTLY IF EXISTS idempotency_key_tombstones_resource_idx;
