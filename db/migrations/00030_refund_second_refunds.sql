-- +goose NO TRANSACTION
-- +goose Up
-- The second Refunds of a refund's intent that its key was handed to an
-- operator for, by Stripe id, each with what it did then: {"re_B":
-- {"status": "succeeded", "refund_failed": false}}. A later event of the
-- same Refund that says nothing new (the same status or an older one, the
-- refund still failed or not as then) only raises an alarm, so the
-- operator's settling stands; a pending Refund that then succeeds, or a
-- refund recorded failed since, hands the key over again. This replaced
-- comparing the alarm's words with earlier alarms of the Refund
-- (StripeEventAlarmRaisedBefore, 00029), which any change of wording, or
-- of a field the words name, took for news. NULL: no second Refund.
-- Adding a nullable column without a default rewrites nothing.
--
-- The index of 00029 served only that lookup; it is dropped. CONCURRENTLY,
-- hence no transaction: webhooks write stripe_events all day, and a plain
-- DROP INDEX would queue them behind its exclusive lock. Each statement may
-- run again after a crash before goose recorded the migration.
ALTER TABLE refunds ADD COLUMN IF NOT EXISTS second_refunds jsonb;
DROP INDEX CONCURRENTLY IF EXISTS stripe_events_alarm_object_id_idx;

-- +goose Down
-- As 00029 builds it: an interrupted build left an invalid index that IF
-- NOT EXISTS would keep, so drop that first.
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
ALTER TABLE refunds DROP COLUMN IF EXISTS second_refunds;
