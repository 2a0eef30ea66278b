-- +goose NO TRANSACTION
-- +goose Up
-- The alarms raised by events about one Stripe object. A second Refund of a
-- refund's intent hands the refund's key back to the operator once for what
-- it did with the money (StripeEventAlarmRaisedBefore): a later event about
-- the same Refund that says the same (charge.refund.updated beside
-- refund.updated, a redelivery under another id) only alarms, and does not
-- undo the operator's settling. The lookup runs inside the webhook's
-- transaction, the refund locked, so it may not scan stripe_events, which
-- grows by every event; alarms are rare, so the index is small.
--
-- CONCURRENTLY: webhooks write this table all day. A build that was
-- interrupted leaves an invalid index that IF NOT EXISTS would keep: drop it
-- first (see 00024).
-- +goose StatementBegin
DO $$
BEGIN
    PERFORM set_config('lock_timeout', '5s', true);
    IF EXISTS (SELECT 1 FROM pg_index
               WHERE indexrelid = to_regclass('stripe_events_alarm_object_id_idx') AND NOT indisvalid) THEN
        DROP INDEX stripe_events_alarm_object_id_idx;
    END IF;
END $$;
-- +goose StatementEnd
CREATE INDEX CONCURRENTLY IF NOT EXISTS stripe_events_alarm_object_id_idx
    ON stripe_events (object_id)
    WHERE outcome = 'alarm';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS stripe_events_alarm_object_id_idx;
